package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
)

// TestJobSubmitLuaHoldsForTheBridge runs slurmctld with the job_submit.lua
// JobSubmitLua writes for an account map: GPU jobs of a mapped account
// (--gres and --gpus) enter held without --hold, a mapped account's job
// without GPUs and an unmapped account's GPU job are Slurm's and run at
// once; the bridge releases the held ones on jobfabric's placement.
func TestJobSubmitLuaHoldsForTheBridge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := slurm.Mapping{Accounts: map[string]string{"phys": "acme"}, DefaultWorkspace: "training"}
	p := startPairWith(t, ctx, 1, 4, "training", 32, slurmtest.Options{JobSubmitLua: slurm.JobSubmitLua(m)}, nil)
	sc, admin := p.sc, p.admin
	sbatch := func(args ...string) string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", append([]string{"--parsable", "-o", "/dev/null", "--wrap", "true"}, args...)...)
		if err != nil {
			t.Fatalf("sbatch %v: %v\n%s", args, err, sc.Log())
		}
		return strings.TrimSpace(string(out))
	}
	gres := sbatch("-A", "phys", "-N", "1", "--gres=gpu:8")
	gpus := sbatch("-A", "phys", "-N", "1", "--gpus=8")
	cpu := sbatch("-A", "phys", "-N", "1")
	other := sbatch("-A", "zzz", "-N", "1", "--gres=gpu:8")
	state := func(id string) (string, string) {
		out, err := sc.Command(ctx, "squeue", "-h", "-t", "all", "-j", id, "-o", "%T|%r")
		if err != nil {
			t.Fatal(err)
		}
		st, reason, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
		return st, reason
	}
	for _, id := range []string{gres, gpus} {
		if st, reason := state(id); st != "PENDING" || !strings.HasPrefix(reason, "JobHeld") {
			t.Errorf("GPU job %s of a mapped account is %s (%s), want held by job_submit.lua\n%s", id, st, reason, sc.Log())
		}
	}
	for _, id := range []string{cpu, other} {
		sc.Poll(t, "job "+id+" is not Slurm's to run", func() (bool, string) {
			st, reason := state(id)
			return st == "CONFIGURING" || st == "RUNNING", st + " " + reason
		})
	}
	// They hold GPUs jobfabric does not know of: Slurm's own jobs are
	// best kept off the servers jobfabric places on (docs/slurm.md).
	if _, err := sc.Command(ctx, "scancel", cpu, other); err != nil {
		t.Fatal(err)
	}
	b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, Mapping: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var released int
	sc.Poll(t, "the bridge did not release the held jobs", func() (bool, string) {
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released += st.Released
		return released == 2, fmt.Sprint(released)
	})
	for _, id := range []string{gres, gpus} {
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		sc.Poll(t, "slurm job "+id+" was not allocated on its placement", func() (bool, string) {
			out, _ := sc.Command(ctx, "squeue", "-h", "-j", id, "-o", "%N")
			nl := strings.TrimSpace(string(out))
			return nl == slurm.PlacedNodes(j)[0], nl
		})
	}
}
