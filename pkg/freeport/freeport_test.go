package freeport

import "testing"

// Port never hands out a port twice, even after the port it gave was closed again.
func TestPortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// Port's ports lie below the kernel's ephemeral range, where no outgoing connection can
// take one between its pick and its service's bind.
func TestPortIsBelowTheEphemeralRange(t *testing.T) {
	high := firstEphemeralPort()
	for range 200 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowestPort || p >= high {
			t.Fatalf("port %d outside %d-%d", p, lowestPort, high-1)
		}
	}
}
