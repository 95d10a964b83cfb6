package agent_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/agent"
	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// fakeClock moves only when told; After fires when the clock passes its
// deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// server is a fake control plane: it keeps the last facts' hash and
// answers heartbeats like the real one.
type server struct {
	mu         sync.Mutex
	hash       string
	reports    int
	beats      int
	fail       error
	lastFacts  domain.HostFacts
	forgetNext bool
}

func (s *server) ReportFacts(_ context.Context, node string, req api.HostReportRequest) (*domain.HostStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	s.reports++
	s.lastFacts = req.Facts
	s.hash = hostfacts.Fingerprint(&req.Facts)
	return &domain.HostStatus{Node: node}, nil
}

func (s *server) Heartbeat(_ context.Context, _ string, req api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	s.beats++
	if s.forgetNext {
		s.hash, s.forgetNext = "", false
	}
	return &api.HeartbeatResponse{NeedFacts: req.FactsHash != s.hash, HeartbeatSeconds: 5, TimeoutSeconds: 15}, nil
}

func (s *server) counts() (reports, beats int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports, s.beats
}

// discoverer answers from the recorded h100-roce host, or fails.
type discoverer struct {
	mu    sync.Mutex
	fail  error
	calls int
	edit  func(*domain.HostFacts)
}

func (d *discoverer) Collect(ctx context.Context) (*domain.HostFacts, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.fail != nil {
		return nil, d.fail
	}
	dir := os.DirFS("../hostfacts/testdata/hosts/h100-roce")
	f, err := (&hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: "gpu-a1"}).Collect(ctx)
	if err == nil && d.edit != nil {
		d.edit(f)
	}
	return f, err
}

func newAgent(t *testing.T, srv *server, disc *discoverer, clk *fakeClock) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Node: "gpu-a1", Agent: "jobfabric-agent test", Discover: disc, Report: srv, Clock: clk, Rediscover: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAgentCycles(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	srv, disc := &server{}, &discoverer{}
	a := newAgent(t, srv, disc, clk)
	ctx := context.Background()
	steps := []struct {
		name        string
		before      func()
		wantReports int
		wantBeats   int
		wantCollect int
		wantErr     string
	}{
		{name: "first cycle discovers and sends facts", wantReports: 1, wantBeats: 1, wantCollect: 1},
		{name: "unchanged facts: only a heartbeat", before: func() { clk.advance(5 * time.Second) }, wantReports: 1, wantBeats: 2, wantCollect: 1},
		{name: "rediscovery finds the same facts", before: func() { clk.advance(time.Minute) }, wantReports: 1, wantBeats: 3, wantCollect: 2},
		{name: "a changed driver is sent before the beat", before: func() {
			disc.edit = func(f *domain.HostFacts) { f.Driver = "550.54.15" }
			clk.advance(time.Minute)
		}, wantReports: 2, wantBeats: 4, wantCollect: 3},
		{name: "a server that lost the facts asks again", before: func() { srv.forgetNext = true }, wantReports: 3, wantBeats: 5, wantCollect: 3},
		{name: "the server is unreachable", before: func() { srv.fail = errors.New("connection refused") }, wantReports: 3, wantBeats: 5, wantCollect: 3, wantErr: "heartbeat: connection refused"},
		{name: "a failed discovery is reported as no GPUs", before: func() {
			srv.fail = nil
			disc.fail = errors.New("nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
			clk.advance(time.Minute)
		}, wantReports: 4, wantBeats: 6, wantCollect: 4},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		err := a.Once(ctx)
		if (err == nil) != (st.wantErr == "") || (err != nil && !strings.Contains(err.Error(), st.wantErr)) {
			t.Fatalf("%s: error %v, want %q", st.name, err, st.wantErr)
		}
		reports, beats := srv.counts()
		if reports != st.wantReports || beats != st.wantBeats || disc.calls != st.wantCollect {
			t.Fatalf("%s: %d reports, %d beats, %d discoveries; want %d, %d, %d", st.name, reports, beats, disc.calls, st.wantReports, st.wantBeats, st.wantCollect)
		}
	}
	if f := srv.lastFacts; len(f.GPUs) != 0 || len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("facts after a failed discovery: %+v", f)
	}
	if a.Interval() != 5*time.Second {
		t.Fatalf("interval %v, want the server's 5s", a.Interval())
	}
}

func TestAgentRunBacksOffAndStops(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	srv, disc := &server{fail: errors.New("connection refused")}, &discoverer{}
	a := newAgent(t, srv, disc, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitPending := func() {
		deadline := time.Now().Add(5 * time.Second)
		for clk.pending() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the agent never waited")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Failing: retries after 1s, then 2s (backoff), never more often.
	waitPending()
	clk.advance(999 * time.Millisecond)
	if _, beats := srv.counts(); beats != 0 {
		t.Fatal("retried before the backoff")
	}
	srv.mu.Lock()
	srv.fail = nil
	srv.mu.Unlock()
	clk.advance(time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if reports, beats := srv.counts(); reports == 1 && beats == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not recover")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestAgentConfig(t *testing.T) {
	tests := map[string]struct {
		cfg  agent.Config
		want string
	}{
		"bad node":    {cfg: agent.Config{Node: "GPU A1", Discover: &discoverer{}, Report: &server{}, Clock: &fakeClock{}}, want: "node"},
		"no reporter": {cfg: agent.Config{Node: "gpu-a1", Discover: &discoverer{}, Clock: &fakeClock{}}, want: "required"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := agent.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
