// Fault injection, for `stockflow chaos`: the dependencies' processes stopped and started
// behind the services' backs, and the services' connections routed through a proxy that can
// slow, reset or cut them.

package launcher

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Dependencies a Route may redirect.
const (
	DepPostgres = "postgres"
	DepNATS     = "nats"
)

// routed rewrites every host of a service's dependency URL (a comma-separated list for a NATS
// cluster) through o.Route, when there is one.
func (o Options) routed(svc, dep, urls string) string {
	if o.Route == nil {
		return urls
	}
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		if err != nil {
			continue // Start's service refuses it with a clearer message than ours
		}
		u.Host = o.Route(svc, dep, u.Host)
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// NATSNodes are the names of the launcher's nats-servers ("nats", then "nats-2", "nats-3" in a
// cluster), with their client addresses.
func (s *System) NATSNodes() map[string]string {
	out := map[string]string{}
	if s.opts.NATSURL != "" {
		return out // an external NATS is not ours to kill
	}
	for _, n := range s.opts.natsNodes() {
		out[n.name] = fmt.Sprintf("127.0.0.1:%d", n.client)
	}
	return out
}

// KillNATS stops one of the launcher's nats-servers abruptly (SIGKILL), as a crash would.
func (s *System) KillNATS(node string) error {
	pid := readPid(s.opts.path("pids", node+".pid"))
	if pid <= 0 || !Alive(pid) {
		return fmt.Errorf("nats-server %s is not running", node)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	waitGone(pid, 5*time.Second)
	return nil
}

// StartNATS starts a nats-server KillNATS stopped again, with the configuration and store it
// had: what it acknowledged before the kill must still be there.
func (s *System) StartNATS(ctx context.Context, node string) error {
	for _, n := range s.opts.natsNodes() {
		if n.name != node {
			continue
		}
		bin, err := NATSBinary(ctx, s.opts)
		if err != nil {
			return err
		}
		if _, err := spawn(s.opts, n.name, exec.Command(bin, "-c", s.opts.natsConf(n))); err != nil {
			return err
		}
		return waitListening(n.client)
	}
	return fmt.Errorf("no nats-server %q", node)
}

// StopPostgres stops the throwaway cluster the way a crash does (pg_ctl stop -m immediate:
// no checkpoint, crash recovery at the next start). A given DATABASE_URL is not ours to stop.
func (s *System) StopPostgres(ctx context.Context) error {
	data, err := s.pgData()
	if err != nil {
		return err
	}
	return pgCtl(ctx, data, "stop", "-m", "immediate", "-w")
}

// StartPostgres starts the throwaway cluster StopPostgres stopped.
func (s *System) StartPostgres(ctx context.Context) error {
	if _, err := s.pgData(); err != nil {
		return err
	}
	_, err := EnsurePostgres(ctx, s.opts)
	return err
}

func (s *System) pgData() (string, error) {
	b, err := os.ReadFile(s.opts.path("pids", "pg.data"))
	if err != nil {
		return "", fmt.Errorf("no throwaway PostgreSQL of this run (DATABASE_URL is used as given): %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Exited reports whether a service this System started has exited since (it crashed, or its
// start failed); a service never started or killed through Kill counts as exited.
func (s *System) Exited(svc string) bool {
	p := s.procs[svc]
	if p == nil {
		return true
	}
	select {
	case <-p.exited:
		delete(s.procs, svc)
		return true
	default:
		return false
	}
}

// SetServiceEnv sets extra environment for one service's next Start (KEY=VALUE, after
// Options.Env): a clock step is a restart with CLOCK_OFFSET set.
func (s *System) SetServiceEnv(svc string, env ...string) {
	if s.serviceEnv == nil {
		s.serviceEnv = map[string][]string{}
	}
	s.serviceEnv[svc] = env
}
