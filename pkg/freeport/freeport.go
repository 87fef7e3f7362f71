// Package freeport picks TCP ports for servers a test or the launcher starts: free now, below
// the kernel's ephemeral range, and never the same twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut are the ports Port returned: a port is free only until its service binds it,
// and the kernel may offer it again meanwhile (CI once gave stock and timeout the same one).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Ports Port hands out lie below the kernel's ephemeral range (ip_local_port_range), where
// no outgoing connection takes them: a port picked from 127.0.0.1:0 is an ephemeral one, and a
// client's connect could take it between the pick and the service's bind, or while a
// restarted service is down (a chaos run once failed with "bind: address already in use").
const (
	lowestPort        = 20000
	ephemeralFallback = 32768 // Linux's default first ephemeral port
)

// Port is a TCP port on 127.0.0.1 that nothing listens on now, below the ephemeral range,
// never one it returned before in this process.
func Port() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	high := firstEphemeralPort()
	for range 1000 {
		port := lowestPort + rand.IntN(high-lowestPort)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 1000 tries", lowestPort, high-1)
}

// firstEphemeralPort is the low end of the kernel's ephemeral port range, or Linux's default
// where it cannot be read (or leaves too little room below it).
func firstEphemeralPort() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ephemeralFallback
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ephemeralFallback
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < lowestPort+1000 {
		return ephemeralFallback
	}
	return low
}
