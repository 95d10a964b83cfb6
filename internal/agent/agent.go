package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// Clock is the agent's time source; tests drive a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Reporter is the control plane as the agent sees it (the API client
// implements it).
type Reporter interface {
	ReportFacts(ctx context.Context, node string, req api.HostReportRequest) (*domain.HostStatus, error)
	Heartbeat(ctx context.Context, node string, req api.HeartbeatRequest) (*api.HeartbeatResponse, error)
}

// Discoverer finds the node's facts (hostfacts.Collector).
type Discoverer interface {
	Collect(ctx context.Context) (*domain.HostFacts, error)
}

// Config configures an agent.
type Config struct {
	Node     string
	Agent    string // what the agent calls itself: version and host
	Discover Discoverer
	Report   Reporter
	Clock    Clock
	Logger   *slog.Logger
	// Interval between heartbeats; 0 follows the server's advice (a third
	// of the heartbeat timeout), 20s until the first answer.
	Interval time.Duration
	// Rediscover is how often the facts are collected again (default 1m):
	// a GPU that falls off the bus shows up at most this late.
	Rediscover time.Duration
}

// Defaults.
const (
	DefaultInterval   = 20 * time.Second
	DefaultRediscover = time.Minute
	maxBackoff        = time.Minute
)

// Agent reports one node's facts and heartbeats.
type Agent struct {
	cfg        Config
	facts      *domain.HostFacts
	hash       string // of facts
	sent       string // hash the server last acknowledged
	discovered time.Time
	interval   time.Duration
}

// New checks the configuration.
func New(cfg Config) (*Agent, error) {
	if err := domain.ValidateName("node", cfg.Node); err != nil {
		return nil, err
	}
	if cfg.Discover == nil || cfg.Report == nil || cfg.Clock == nil {
		return nil, errors.New("agent: Discover, Report and Clock are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Rediscover <= 0 {
		cfg.Rediscover = DefaultRediscover
	}
	a := &Agent{cfg: cfg, interval: cfg.Interval}
	if a.interval <= 0 {
		a.interval = DefaultInterval
	}
	return a, nil
}

// Interval is the current heartbeat interval.
func (a *Agent) Interval() time.Duration { return a.interval }

// Once runs one cycle: discover when due, send the facts when they changed
// or the server asks, and beat.
func (a *Agent) Once(ctx context.Context) error {
	now := a.cfg.Clock.Now()
	if a.facts == nil || now.Sub(a.discovered) >= a.cfg.Rediscover {
		a.discover(ctx, now)
	}
	if a.hash != a.sent {
		if err := a.send(ctx); err != nil {
			return err
		}
	}
	resp, err := a.cfg.Report.Heartbeat(ctx, a.cfg.Node, api.HeartbeatRequest{Agent: a.cfg.Agent, FactsHash: a.hash})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if a.cfg.Interval <= 0 && resp.HeartbeatSeconds > 0 {
		a.interval = time.Duration(resp.HeartbeatSeconds) * time.Second
	}
	if resp.NeedFacts {
		// The server lost or never had them (a new leader, a restore).
		if err := a.send(ctx); err != nil {
			return err
		}
	}
	for _, c := range resp.Conditions {
		a.cfg.Logger.Warn("node condition", "node", a.cfg.Node, "type", c.Type, "message", c.Message, "cordons", c.Cordons)
	}
	return nil
}

// discover collects the facts. A failed discovery is itself a fact: the
// node reports no GPUs and why, so the server sees them gone.
func (a *Agent) discover(ctx context.Context, now time.Time) {
	f, err := a.cfg.Discover.Collect(ctx)
	if err != nil {
		a.cfg.Logger.Error("discovery failed", "node", a.cfg.Node, "err", err)
		f = &domain.HostFacts{GPUs: []domain.HostGPU{}, NICs: []domain.HostNIC{}, Problems: []string{truncate("discovery failed: "+err.Error(), 250)}}
	}
	for _, p := range f.Problems {
		a.cfg.Logger.Warn("discovery", "node", a.cfg.Node, "problem", p)
	}
	h := hostfacts.Fingerprint(f)
	if h != a.hash {
		a.cfg.Logger.Info("facts", "node", a.cfg.Node, "gpus", len(f.GPUs), "nics", len(f.NICs), "driver", f.Driver)
	}
	a.facts, a.hash, a.discovered = f, h, now
}

func (a *Agent) send(ctx context.Context) error {
	rec, err := a.cfg.Report.ReportFacts(ctx, a.cfg.Node, api.HostReportRequest{Agent: a.cfg.Agent, Facts: *a.facts})
	if err != nil {
		return fmt.Errorf("report facts: %w", err)
	}
	a.sent = a.hash
	for _, c := range rec.Conditions {
		a.cfg.Logger.Warn("drift", "node", a.cfg.Node, "type", c.Type, "message", c.Message, "cordons", c.Cordons)
	}
	return nil
}

// Run cycles until ctx ends, backing off (up to a minute) while the
// server cannot be reached.
func (a *Agent) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		wait := a.interval
		if err := a.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.cfg.Logger.Warn("agent cycle failed", "node", a.cfg.Node, "err", err, "retry_in", backoff)
			wait = min(backoff, a.interval)
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.cfg.Clock.After(wait):
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
