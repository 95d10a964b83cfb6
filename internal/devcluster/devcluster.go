// Package devcluster starts jobfabric servers on loopback: one for the
// demo, three or five for failover tests and benchmarks. The servers are
// real (Raft over TLS authenticated by a cluster secret, bbolt with fsync,
// HTTP). Start runs them in this process (only the process is shared);
// StartProcs runs each as a `jobfabric server` process of its own, as
// production does. A single server runs raft in memory, as `jobfabric
// server` does.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Options tunes the cluster.
type Options struct {
	Logger *slog.Logger
	// RaftTimeout shortens elections for tests (0: store defaults).
	RaftTimeout time.Duration
	// Listen is the first server's API address (default 127.0.0.1:0).
	Listen string
	// Tune, when set, adjusts every server's configuration (scheduler
	// policy, intervals) before it starts.
	Tune func(*server.Config)
	// Clock, FabricDriver, LogStore, Retention and RetainEvery set those of every
	// server's configuration (server.Config) when not zero, for callers
	// that may not link the server package (internal/bench: only front
	// ends do).
	Clock        tstime.Clock
	FabricDriver string
	LogStore     string
	Retention    state.Retention
	RetainEvery  time.Duration
}

// Cluster is a set of in-process servers sharing one base directory.
type Cluster struct {
	Dir        string
	Servers    []*server.Server
	AdminToken string
	// Secret is the cluster secret the members share (nil for one server).
	Secret []byte
	opts   Options
	cfgs   []server.Config
}

// Start launches n servers under dir: the first bootstraps, the others join it.
func Start(ctx context.Context, dir string, n int, o Options) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("devcluster: need at least one server, got %d", n)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	c := &Cluster{Dir: dir, opts: o}
	if n > 1 {
		secret, err := store.NewSecret()
		if err != nil {
			return nil, err
		}
		c.Secret = secret
	}
	listen := o.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	for i := 0; i < n; i++ {
		cfg := server.Config{
			DataDir: filepath.Join(dir, fmt.Sprintf("node%d", i+1)), NodeID: fmt.Sprintf("node%d", i+1),
			Listen: "127.0.0.1:0", Logger: o.Logger.With("node", i+1), RaftTimeout: o.RaftTimeout,
		}
		if n > 1 {
			cfg.RaftAddr, cfg.ClusterSecret = "127.0.0.1:0", c.Secret
		}
		if o.Clock != nil {
			cfg.Clock = o.Clock
		}
		if o.FabricDriver != "" {
			cfg.FabricDriver = o.FabricDriver
		}
		if o.LogStore != "" {
			cfg.LogStore = o.LogStore
		}
		if o.Retention.Enabled() {
			cfg.Retention = o.Retention
		}
		if o.RetainEvery > 0 {
			cfg.RetainEvery = o.RetainEvery
		}
		if o.Tune != nil {
			o.Tune(&cfg)
		}
		if i == 0 {
			cfg.Listen = listen
		} else {
			cfg.Join, cfg.JoinToken = c.Servers[0].URL(), c.AdminToken
		}
		s, err := server.Start(ctx, cfg)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("start server %d: %w", i+1, err)
		}
		if i == 0 {
			c.AdminToken = s.AdminToken()
		}
		// Restarts reuse the bound addresses.
		cfg.Listen = s.ListenAddr()
		if s.RaftListening() {
			cfg.RaftAddr = s.RaftAddr()
		}
		c.cfgs = append(c.cfgs, cfg)
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// Client returns an admin client of server i.
func (c *Cluster) Client(i int) *client.Client {
	cl, err := client.New(c.Servers[i].URL(), c.AdminToken, nil)
	if err != nil {
		panic(err) // URLs come from running servers: cannot be malformed
	}
	return cl
}

// Leader returns the index of the current leader, or -1.
func (c *Cluster) Leader() int {
	for i, s := range c.Servers {
		if s != nil && s.IsLeader() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until some running server leads.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if i := c.Leader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader elected: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts server i down (its data stays).
func (c *Cluster) Stop(i int) error {
	s := c.Servers[i]
	c.Servers[i] = nil
	if s == nil {
		return nil
	}
	return s.Close()
}

// Restart starts server i again from its data directory, on the same
// addresses, without joining (it is already a member).
func (c *Cluster) Restart(ctx context.Context, i int) error {
	return c.RestartWith(ctx, i, nil)
}

// RestartWith restarts server i as Restart does, its configuration changed
// by tune first (and kept for later restarts): a member given another
// binary (server.Config.ApplyRules), or other flags.
func (c *Cluster) RestartWith(ctx context.Context, i int, tune func(*server.Config)) error {
	if c.Servers[i] != nil {
		return fmt.Errorf("server %d is running", i+1)
	}
	if tune != nil {
		tune(&c.cfgs[i])
	}
	cfg := c.cfgs[i]
	cfg.Join, cfg.JoinToken = "", ""
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c.Servers[i] = s
	return nil
}

// Close stops every server.
func (c *Cluster) Close() error {
	var errs []error
	for i := range c.Servers {
		errs = append(errs, c.Stop(i))
	}
	return errors.Join(errs...)
}
