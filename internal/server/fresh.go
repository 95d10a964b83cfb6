package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// freshGrace is how long a shutdown waits for a connection that carries no
// request yet to start one. net/http's Shutdown counts such a connection
// idle only after 5 s, so a client that dialed ahead of need (a pool
// warming up) held every restart for up to 5 s.
const freshGrace = 250 * time.Millisecond

// freshConns tracks the server's connections that have not begun a
// request (http.StateNew), so that a shutdown can close them.
type freshConns struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

// track is the http.Server's ConnState hook.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		if f.m == nil {
			f.m = map[net.Conn]struct{}{}
		}
		f.m[c] = struct{}{}
		return
	}
	delete(f.m, c)
}

// closeAll closes every connection that has still not begun a request.
// A request that began before is not touched: Shutdown waits for it.
func (f *freshConns) closeAll() {
	f.mu.Lock()
	conns := make([]net.Conn, 0, len(f.m))
	for c := range f.m {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
