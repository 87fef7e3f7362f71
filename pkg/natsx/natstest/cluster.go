package natstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/stockflow/stockflow/pkg/freeport"
)

// Cluster is n embedded JetStream servers routed into one cluster, as the three-node
// deployment runs them (fsync on every write, sync_interval: always): a stream with 3
// replicas keeps a copy on every node. Nodes can be shut down and restarted with the same
// store and ports, so tests can kill a stream's leader and watch it come back. Streams live in
// the default account ($G): the cluster requires no authentication.
//
// Every route between two nodes runs through a local forwarder of the Cluster's, so Shutdown
// can cut a node off before stopping it: the server's own Shutdown hands its leaderships over
// first, which a crash never does.
type Cluster struct {
	t       testing.TB
	nodes   []node
	servers []*server.Server // nil while the node is shut down
	sink    string           // host:port every node advertises; see start

	mu    sync.Mutex
	down  []bool             // forwarders refuse routes to and from a down node
	pipes map[*pipe]struct{} // forwarded route connections
}

// node is what a node keeps across restarts.
type node struct {
	name                    string
	clientPort, clusterPort int
	storeDir                string
	routes                  []string // the forwarders to every other node
}

// pipe is one route connection forwarded from node from to node to.
type pipe struct {
	from, to int
	a, b     net.Conn
}

// clusterWait bounds every wait for the cluster to elect leaders or a node to catch up.
const clusterWait = 30 * time.Second

// StartCluster runs n servers in one cluster on local ports and returns once they have a
// JetStream meta leader that knows all n and every node is healthy. Every node is shut down
// when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	// The forwarders need every node's cluster port before any node starts, and Restart
	// needs the same ports again, so all are picked up front.
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t, servers: make([]*server.Server, n), down: make([]bool, n), pipes: map[*pipe]struct{}{}}
	for i := range n {
		c.nodes = append(c.nodes, node{
			name:        fmt.Sprintf("natstest-%d", i),
			clientPort:  ports[i],
			clusterPort: ports[n+i],
			storeDir:    t.TempDir(),
		})
	}
	var listeners []net.Listener
	// Registered after the store directories, so it runs before they are removed.
	t.Cleanup(func() {
		for i := range c.servers {
			c.Shutdown(i)
		}
		for _, l := range listeners {
			l.Close()
		}
	})
	listen := func(from, to int) string {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: route forwarder: %v", err)
		}
		listeners = append(listeners, l)
		go c.forward(l, from, to)
		return l.Addr().String()
	}
	c.sink = listen(-1, -1)
	for i := range n {
		for j := range n {
			if j != i {
				c.nodes[i].routes = append(c.nodes[i].routes, "nats-route://"+listen(i, j))
			}
		}
	}
	for i := range n {
		c.start(i)
	}
	c.waitHealthy()
	return c
}

// URLs is every node's nats:// URL, comma-separated as nats.Connect (and natsx.Connect)
// accept them: a client reconnects to another node when its own goes down.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// URL is node i's nats:// URL. A client connected through it alone still learns the other
// nodes from the server and reconnects to them.
func (c *Cluster) URL(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].clientPort)
}

// Shutdown stops node i as a crash would: its routes are cut first, so the other nodes hear
// nothing more from it (no leadership handover; they elect new leaders once it has been
// silent for the raft election timeout, seconds), then the server stops and its clients are
// disconnected. Shutting down a stopped node does nothing. What the node wrote to its store
// stays for Restart: an in-process stop cannot lose the OS page cache.
func (c *Cluster) Shutdown(i int) {
	s := c.servers[i]
	if s == nil {
		return
	}
	c.mu.Lock()
	c.down[i] = true
	for p := range c.pipes {
		if p.from == i || p.to == i {
			p.a.Close()
			p.b.Close()
		}
	}
	c.mu.Unlock()
	s.Shutdown()
	s.WaitForShutdown()
	c.servers[i] = nil
}

// Restart starts node i again with its store and ports and waits until it has rejoined: the
// cluster has a meta leader and every running node, i included, reports healthy, which means
// its copies of the streams and consumers have caught up.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.servers[i] != nil {
		c.t.Fatalf("natstest: restart node %d: it is running", i)
	}
	c.mu.Lock()
	c.down[i] = false
	c.mu.Unlock()
	c.start(i)
	c.waitHealthy()
}

// StreamLeader is the index of the running node that leads stream, or -1 while none does
// (during an election).
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.servers {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// MoveStreamLeader makes node i the leader of stream and waits until it is, so that reads of
// the stream are answered from node i's copy. It asks the leader to step down with i preferred,
// again every few seconds while the leadership goes elsewhere (a node just restarted may not
// be taken yet).
func (c *Cluster) MoveStreamLeader(stream string, i int) {
	c.t.Helper()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		c.t.Fatalf("natstest: move %s leader: %v", stream, err)
	}
	defer nc.Close()
	req, err := json.Marshal(server.JSApiLeaderStepdownRequest{Placement: &server.Placement{Preferred: c.nodes[i].name}})
	if err != nil {
		c.t.Fatalf("natstest: move %s leader: %v", stream, err)
	}
	deadline := time.Now().Add(clusterWait)
	for c.StreamLeader(stream) != i {
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: node %d not leading %s within %v", i, stream, clusterWait)
		}
		if c.StreamLeader(stream) >= 0 {
			reply, err := nc.Request(fmt.Sprintf(server.JSApiStreamLeaderStepDownT, stream), req, 5*time.Second)
			var resp server.JSApiStreamLeaderStepDownResponse
			if err == nil {
				err = json.Unmarshal(reply.Data, &resp)
			}
			if err != nil || resp.Error != nil {
				c.t.Logf("natstest: move %s leader to node %d: %v %v; retrying", stream, i, err, resp.Error)
			}
		}
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && c.StreamLeader(stream) != i; {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// start runs node i and waits until it accepts connections. Its ports were free when picked,
// but until the node listens on them any connection on the machine may be given one (outgoing
// connections take their local ports from the same range): a node that finds a port taken is
// started again on fresh ones. The other nodes reach it through the forwarders, which look up
// its cluster port when they connect; a client finds the new port in URL.
func (c *Cluster) start(i int) {
	c.t.Helper()
	for attempt := 1; ; attempt++ {
		srv, err := tryServe(c.options(i))
		if err == nil {
			c.servers[i] = srv
			return
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			c.t.Fatalf("natstest: %v", err)
		}
		c.t.Logf("natstest: %v; starting node %d again on fresh ports", err, i)
		ports := freePorts(c.t, 2)
		c.mu.Lock()
		c.nodes[i].clientPort, c.nodes[i].clusterPort = ports[0], ports[1]
		c.mu.Unlock()
	}
}

// options are node i's server options.
func (c *Cluster) options(i int) *server.Options {
	c.mu.Lock()
	n := c.nodes[i]
	c.mu.Unlock()
	return &server.Options{
		ServerName: n.name,
		Host:       "127.0.0.1",
		Port:       n.clientPort,
		StoreDir:   n.storeDir,
		// sync_interval: always, as every configuration the project ships sets it.
		SyncAlways: true,
		Cluster: server.ClusterOpts{
			Name: "natstest", Host: "127.0.0.1", Port: n.clusterPort,
			// A node told of a new peer dials the address the peer advertises unless it has a
			// route configured to it: that dial would bypass the forwarders, so it goes to the
			// sink, which hangs up. The configured routes (all through forwarders) form the mesh.
			Advertise: c.sink,
		},
		Routes: server.RoutesFromStr(strings.Join(n.routes, ",")),
	}
}

// waitHealthy waits until a meta leader knows every node and every running node is healthy.
func (c *Cluster) waitHealthy() {
	c.t.Helper()
	c.wait("a healthy cluster with a JetStream meta leader", func() bool {
		leader := false
		for _, s := range c.servers {
			if s == nil {
				continue
			}
			if h := s.Healthz(nil); h.Status != "ok" || h.Error != "" {
				return false
			}
			leader = leader || s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.nodes)
		}
		return leader
	})
}

func (c *Cluster) wait(what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: waited %v for %s", clusterWait, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// forward accepts the route connections node from dials on l and forwards them to node to's
// cluster port, until l is closed. It hangs up at once while either node is down, and always
// for the sink (from -1).
func (c *Cluster) forward(l net.Listener, from, to int) {
	for {
		a, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer a.Close()
			if from < 0 {
				return
			}
			c.mu.Lock()
			target := fmt.Sprintf("127.0.0.1:%d", c.nodes[to].clusterPort)
			c.mu.Unlock()
			b, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer b.Close()
			p := &pipe{from: from, to: to, a: a, b: b}
			c.mu.Lock()
			if c.down[from] || c.down[to] {
				c.mu.Unlock()
				return
			}
			c.pipes[p] = struct{}{}
			c.mu.Unlock()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
			go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
			<-done // one side hung up or was cut; the deferred closes end the other copy
			c.mu.Lock()
			delete(c.pipes, p)
			c.mu.Unlock()
		}()
	}
}

// freePorts returns n distinct local ports that were free a moment ago, below the ephemeral
// range: a node restarted on its port finds it free although clients connected meanwhile.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		p, err := freeport.Port()
		if err != nil {
			t.Fatalf("natstest: pick a port: %v", err)
		}
		ports[i] = p
	}
	return ports
}
