package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// session is one login: the token the browser gave, kept here and never
// sent back, and the CSRF token its pages carry.
type session struct {
	token   string
	who     domain.Token
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions is this member's logins, by the SHA-256 of the cookie value (a
// copy of the map, in a dump or a debugger, gives no usable cookie). They
// are not replicated: after a restart, or on another member, one logs in
// again.
type sessions struct {
	mu    sync.Mutex
	m     map[string]*session
	clock tstime.Clock
	// idle ends a session not used for that long, max any session.
	idle, max time.Duration
	limit     int
}

func newSessions(clock tstime.Clock, idle, max time.Duration, limit int) *sessions {
	return &sessions{m: map[string]*session{}, clock: clock, idle: idle, max: max, limit: limit}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

func key(cookie string) string {
	h := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(h[:])
}

// create starts a session and returns the cookie value that names it.
func (ss *sessions) create(token string, who domain.Token) (string, *session) {
	now := ss.clock.Now()
	id := randomHex(32)
	s := &session{token: token, who: who, csrf: randomHex(32), created: now, seen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked(now)
	if len(ss.m) >= ss.limit {
		// The oldest goes: a flood of logins must not grow memory without
		// bound.
		var oldest string
		var at time.Time
		for k, s := range ss.m {
			if oldest == "" || s.seen.Before(at) {
				oldest, at = k, s.seen
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[key(id)] = s
	return id, s
}

// get returns the live session the cookie names and marks it used.
func (ss *sessions) get(cookie string) (*session, bool) {
	if cookie == "" {
		return nil, false
	}
	now := ss.clock.Now()
	k := key(cookie)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[k]
	if !ok {
		return nil, false
	}
	if ss.expired(s, now) {
		delete(ss.m, k)
		return nil, false
	}
	s.seen = now
	return s, true
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.seen) >= ss.idle || now.Sub(s.created) >= ss.max
}

// end forgets the session the cookie names.
func (ss *sessions) end(cookie string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, key(cookie))
}

func (ss *sessions) sweepLocked(now time.Time) {
	for k, s := range ss.m {
		if ss.expired(s, now) {
			delete(ss.m, k)
		}
	}
}

// sameSecret compares secrets in constant time.
func sameSecret(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// sameOrigin refuses a state-changing request another site made the
// browser send: its Origin (or, without one, its Referer) must be this
// host, and Sec-Fetch-Site, when the browser sends it, same-origin.
// Requests without any of them (curl) are left to the CSRF token.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = r.Header.Get("Referer")
	}
	if origin == "" {
		return true
	}
	for _, scheme := range []string{"http://", "https://"} {
		if o := scheme + r.Host; origin == o || (len(origin) > len(o) && origin[:len(o)+1] == o+"/") {
			return true
		}
	}
	return false
}
