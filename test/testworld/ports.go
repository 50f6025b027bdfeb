package testworld

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports are taken from below the kernel's ephemeral range (32768 and up on
// Linux), so that no outgoing connection of one component can be holding a
// port when another component tries to listen on it.
const (
	portRangeStart = 20000
	portRangeEnd   = 32000 // exclusive
)

// portAllocator hands out distinct ports that were free when probed. The
// probe's listener is closed before the port is used, so another program in
// the same network namespace could take it in between; starting each world
// at a random point of the range makes that unlikely even for two worlds in
// one namespace.
type portAllocator struct {
	mu   sync.Mutex
	next int
	used map[int]bool
}

func newPortAllocator() *portAllocator {
	return &portAllocator{
		next: portRangeStart + rand.IntN(portRangeEnd-portRangeStart),
		used: map[int]bool{},
	}
}

// allocate returns a port nothing listens on, on any address.
func (a *portAllocator) allocate() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range portRangeEnd - portRangeStart {
		port := a.next
		a.next++
		if a.next == portRangeEnd {
			a.next = portRangeStart
		}
		if a.used[port] {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("close probe listener on port %d: %w", port, err)
		}
		a.used[port] = true
		return port, nil
	}
	return 0, errors.New("no free port left in the test world's port range")
}

// allocateN returns n ports.
func (a *portAllocator) allocateN(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := a.allocate()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}
