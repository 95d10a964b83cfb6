package server_test

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// TestSkippedCyclesWouldChangeNothing runs the scheduling loop through
// ticks, kicks, ends and submits on a full cluster with every skipped
// cycle decided anyway (CheckSkippedCycles): a cycle is skipped only when
// deciding it would have changed nothing, and a change (a job ending)
// still places the job waiting for its GPUs at once.
func TestSkippedCyclesWouldChangeNothing(t *testing.T) {
	clk := tstime.NewFake(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Clock, cfg.FabricDriver, cfg.CheckSkippedCycles = clk, "none", true
	})
	srv, admin := c.Servers[0], c.Client(0)
	seed(t, admin)
	// 32 GPUs: globex/infer may use 16, acme/research 24; 48 asked.
	var jobs []*domain.Job
	for i := 0; i < 3; i++ {
		jobs = append(jobs, submit(t, admin, "globex", "infer", 8))
		jobs = append(jobs, submit(t, admin, "acme", "research", 8))
	}
	settle := func() {
		t.Helper()
		if err := srv.Settle(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	ended := 0
	for round := 0; round < 30; round++ {
		clk.Advance(2 * time.Second) // a tick
		settle()
		settle() // a kick on the same state
		if round%10 != 9 {
			continue
		}
		// A running job ends: the next cycle must run and place a waiting one.
		for _, j := range jobs {
			cur, err := admin.Job(ctxT(t), j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.State == domain.JobReady || cur.State == domain.JobRunning {
				if _, err := admin.Report(ctxT(t), j.ID, "succeeded", ""); err != nil {
					t.Fatal(err)
				}
				ended++
				break
			}
		}
		settle()
	}
	skipped, wrong := srv.SkippedCycles()
	if wrong != 0 {
		t.Fatalf("%d of %d skipped cycles would have changed the state", wrong, skipped)
	}
	if skipped < 30 {
		t.Fatalf("%d cycles skipped over 30 idle ticks and 30 kicks: the loop re-decides an unchanged state", skipped)
	}
	// Every job that ended made room that a waiting job took.
	placed := 0
	for _, j := range jobs {
		cur, err := admin.Job(ctxT(t), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.PlacedAt != nil {
			placed++
		}
	}
	if ended != 3 || placed < 5 {
		t.Fatalf("%d jobs ended, %d of %d ever placed: a skipped cycle held back a placement", ended, placed, len(jobs))
	}
}
