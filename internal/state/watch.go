package state

import "sync"

// broadcaster tells readers that the state changed, without polling: a
// reader takes the current channel, reads the state, and waits for the
// channel to close; every applied command closes it and starts a new one.
// Taking the channel before reading means no change is missed.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits: applies cost nothing unwatched
}

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcaster) broadcast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Changed returns a channel that is closed after the next command is
// applied (or a snapshot restored). Take it before reading the state, then
// wait on it and read again. A refused command closes it too: readers
// compare what they read, the signal only says "look again".
func (f *FSM) Changed() <-chan struct{} { return f.changed.wait() }
