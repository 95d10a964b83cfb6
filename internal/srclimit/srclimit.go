// Package srclimit admits network clients per source: for each source (an
// IPv4 address, an IPv6 /64, the block one host or one customer usually
// holds) a token bucket of new connections, a count of connections open,
// and a window of failed authentications. It only decides; the caller
// closes the connection or answers the request.
//
// The table is bounded: past MaxSources it forgets the source seen least
// recently among those with no connection open, so a client that cycles
// through addresses cannot grow it without bound. Sources with connections
// open are kept (their count must return to zero), so memory is at most
// MaxSources entries plus one per open connection. A forgotten source
// starts again with a full bucket: a caller must bound the total work
// separately (the API server caps handshakes in progress).
//
// Admission is the configuration the API and the Raft ports share: the
// table's limits, the server-wide handshake limits, and their checks.
package srclimit

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Limits configures a Table. A zero field turns its limit off.
type Limits struct {
	// Rate is the new connections a second one source may open on
	// average, Burst how many it may open at once.
	Rate  float64
	Burst int
	// PerSource caps the connections one source holds open.
	PerSource int
	// Handshakes caps the handshakes one source has in progress (see
	// BeginHandshake): a source stalling handshakes cannot take every
	// slot of a server-wide cap.
	Handshakes int
	// AuthFailures is how many failed authentications one source may
	// make in one AuthWindow; past it, it is refused until the window ends.
	AuthFailures int
	AuthWindow   time.Duration
	// MaxSources bounds the table (0: DefaultMaxSources).
	MaxSources int
}

// DefaultMaxSources is the table's size when Limits.MaxSources is 0: about
// 10 MB at most.
const DefaultMaxSources = 65536

// Reasons a connection is refused, the label values of the refusal metric.
const (
	ReasonRate      = "rate"       // the source's bucket is empty
	ReasonPerSource = "per_source" // the source holds PerSource connections
	// ReasonHandshakes: the source has Handshakes handshakes in progress.
	ReasonHandshakes = "source_handshakes"
)

// Key is the source an address counts under: the address itself for IPv4
// (an IPv4-mapped IPv6 address is IPv4), its /64 for IPv6.
func Key(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

type entry struct {
	key    netip.Prefix
	tokens float64
	at     time.Time // when tokens was last refilled
	open   int
	hs     int // handshakes in progress
	// authStart is when the current window of failures began.
	authStart time.Time
	authFails int
	elem      *list.Element // in Table.idle; nil while open > 0
}

// Table holds the sources' state. It is safe for concurrent use.
type Table struct {
	lim   Limits
	clock tstime.Clock

	mu sync.Mutex
	m  map[netip.Prefix]*entry
	// idle orders the sources with no connection open, most recently
	// seen first: the back is forgotten first.
	idle list.List
}

// New returns an empty table.
func New(lim Limits, clock tstime.Clock) *Table {
	if lim.MaxSources <= 0 {
		lim.MaxSources = DefaultMaxSources
	}
	if lim.Burst < 1 && lim.Rate > 0 {
		lim.Burst = 1
	}
	return &Table{lim: lim, clock: clock, m: map[netip.Prefix]*entry{}}
}

// Limits returns the table's limits.
func (t *Table) Limits() Limits { return t.lim }

// Len is how many sources the table remembers.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// get returns src's entry, creating it (and forgetting the least recently
// seen idle source if the table is full). Under mu.
func (t *Table) get(src netip.Addr, now time.Time) *entry {
	k := Key(src)
	if e, ok := t.m[k]; ok {
		if e.elem != nil {
			t.idle.MoveToFront(e.elem)
		}
		return e
	}
	for len(t.m) >= t.lim.MaxSources && t.idle.Len() > 0 {
		old := t.idle.Remove(t.idle.Back()).(*entry)
		delete(t.m, old.key)
	}
	e := &entry{key: k, tokens: float64(t.lim.Burst), at: now}
	e.elem = t.idle.PushFront(e)
	t.m[k] = e
	return e
}

// Open admits a new connection from src, or says why not (reason is one of
// the Reason constants). An admitted connection must call release once
// when it closes.
func (t *Table) Open(src netip.Addr) (release func(), reason string) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(src, now)
	if t.lim.PerSource > 0 && e.open >= t.lim.PerSource {
		return nil, ReasonPerSource
	}
	if t.lim.Rate > 0 {
		if d := now.Sub(e.at); d > 0 {
			e.tokens = min(float64(t.lim.Burst), e.tokens+d.Seconds()*t.lim.Rate)
		}
		e.at = now
		if e.tokens < 1 {
			return nil, ReasonRate
		}
		e.tokens--
	}
	if e.open == 0 && e.elem != nil {
		// Pinned while open: its count must come back to zero.
		t.idle.Remove(e.elem)
		e.elem = nil
	}
	e.open++
	var once sync.Once
	return func() { once.Do(func() { t.closed(e) }) }, ""
}

func (t *Table) closed(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.open--
	if e.open == 0 {
		e.elem = t.idle.PushFront(e)
	}
}

// BeginHandshake admits a handshake from src, which must hold a
// connection admitted by Open (its entry is kept while it does); end must
// be called once when the handshake ends or its connection closes.
func (t *Table) BeginHandshake(src netip.Addr) (end func(), reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(src, t.clock.Now())
	if t.lim.Handshakes > 0 && e.hs >= t.lim.Handshakes {
		return nil, ReasonHandshakes
	}
	e.hs++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			e.hs--
			t.mu.Unlock()
		})
	}, ""
}

// Bucket is one token bucket: Rate a second on average, Burst at once.
// It is safe for concurrent use.
type Bucket struct {
	rate   float64
	burst  float64
	clock  tstime.Clock
	mu     sync.Mutex
	tokens float64
	at     time.Time
}

// NewBucket returns a full bucket; a Rate of 0 admits everything.
func NewBucket(rate float64, burst int, clock tstime.Clock) *Bucket {
	return &Bucket{rate: rate, burst: float64(max(burst, 1)), clock: clock, tokens: float64(max(burst, 1)), at: clock.Now()}
}

// Allow takes a token if there is one.
func (b *Bucket) Allow() bool {
	if b.rate <= 0 {
		return true
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// AuthRefused says whether src has failed authentication AuthFailures
// times in its current window, and when the window ends. It does not look
// at any token: refusing costs nothing, and says nothing of tokens.
func (t *Table) AuthRefused(src netip.Addr) (retryAfter time.Duration, refused bool) {
	if t.lim.AuthFailures <= 0 || t.lim.AuthWindow <= 0 {
		return 0, false
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[Key(src)]
	if !ok || e.authFails < t.lim.AuthFailures {
		return 0, false
	}
	end := e.authStart.Add(t.lim.AuthWindow)
	if !now.Before(end) {
		e.authFails = 0
		return 0, false
	}
	return end.Sub(now), true
}

// AuthFailed counts a failed authentication from src.
func (t *Table) AuthFailed(src netip.Addr) {
	if t.lim.AuthFailures <= 0 || t.lim.AuthWindow <= 0 {
		return
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(src, now)
	if e.authFails == 0 || !now.Before(e.authStart.Add(t.lim.AuthWindow)) {
		e.authStart, e.authFails = now, 0
	}
	e.authFails++
}
