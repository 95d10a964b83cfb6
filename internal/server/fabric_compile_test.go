package server_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
)

// compileLog records the fabric loop's compiles and warnings.
type compileLog struct {
	mu                sync.Mutex
	full, incremental int
	warns             []string
}

func (l *compileLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *compileLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *compileLog) WithGroup(string) slog.Handler            { return l }
func (l *compileLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Message == "fabric compiled":
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "incremental" {
				if a.Value.Bool() {
					l.incremental++
				} else {
					l.full++
				}
			}
			return true
		})
	case r.Level >= slog.LevelWarn && strings.HasPrefix(r.Message, "fabric"):
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		l.warns = append(l.warns, b.String())
	}
	return nil
}

func (l *compileLog) counts() (full, incremental int, warns []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.full, l.incremental, append([]string(nil), l.warns...)
}

// TestFabricLoopCompilesIncrementally runs jobs of a segmented and a
// vlan-aware tenant through a real server whose fabric loop also compiles
// every input in full and fails the cycle on a difference
// (CheckFabricCompile): the jobs get their network, the loop compiled
// incrementally, and no cycle failed.
func TestFabricLoopCompilesIncrementally(t *testing.T) {
	log := &compileLog{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: slog.New(log), RaftTimeout: 300 * time.Millisecond, Tune: func(cfg *server.Config) {
		cfg.CheckFabricCompile = true
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	admin := c.Client(0)
	seed(t, admin) // acme: server isolation + segmentation; globex: GPU isolation, vlan-aware

	ready := func(id uint64) {
		waitJob(t, admin, id, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	}
	submit := func(spec domain.JobSpec) uint64 {
		j, err := admin.SubmitJob(ctxT(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	a1 := submit(domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	g1 := submit(domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 2})
	ready(a1)
	ready(g1)
	// Stops and starts: removals and additions of allocations, groups,
	// contracts and link ids, each a change of the previous input.
	if _, err := admin.CancelJob(ctxT(t), a1); err != nil {
		t.Fatal(err)
	}
	a2 := submit(domain.JobSpec{Tenant: "acme", Workspace: "prod", GPUs: 8})
	g2 := submit(domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 1})
	ready(a2)
	ready(g2)
	if _, err := admin.CancelJob(ctxT(t), g1); err != nil {
		t.Fatal(err)
	}
	g3 := submit(domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 4})
	ready(g3)

	full, inc, warns := log.counts()
	if len(warns) > 0 {
		t.Fatalf("fabric cycles failed:\n%s", strings.Join(warns, "\n"))
	}
	if inc == 0 || full == 0 {
		t.Fatalf("%d full and %d incremental compiles: want the first full and later ones incremental", full, inc)
	}
	t.Logf("%d full, %d incremental compiles", full, inc)
}
