package slurmtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
)

// TestFreedNodeRunsTheNextJobAfterRestart: a job allocated on the
// harness's node runs a while, slurmctld restarts, the job is cancelled,
// and the next job asking for that node is allocated on it. With power
// saving on, slurmctld had begun booting the node (POWERING_UP,
// NOT_RESPONDING: no slurmd ever registers here), and a restarted
// slurmctld leaves a not-responding node out of the nodes it allocates
// until it registers: the job stayed pending, "Nodes required for job are
// DOWN, DRAINED or reserved for jobs in higher priority partitions"
// (TestBridgeSurvivesSlurmctldRestart's flake in CI).
func TestFreedNodeRunsTheNextJobAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := slurmtest.Start(t, slurmtest.Options{Nodes: "n1", GPUsPerNode: 8})
	sbatch := func(args ...string) string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", append([]string{"--parsable", "-o", "/dev/null", "--wrap", "true", "-w", "n1", "--exclusive", "--gres=gpu:8"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	first := sbatch()
	next := sbatch("--hold")
	onN1 := func(id string) {
		t.Helper()
		sc.Poll(t, "job "+id+" was not allocated on n1", func() (bool, string) {
			out, _ := sc.Run("squeue", "-h", "-j", id, "-o", "%T %N %r")
			if f := strings.Fields(out); len(f) >= 2 && (f[0] == "CONFIGURING" || f[0] == "RUNNING") && f[1] == "n1" {
				return true, ""
			}
			nodes, _ := sc.Run("scontrol", "show", "node", "n1")
			return false, fmt.Sprintf("job %s: %s\n%s", id, out, nodes)
		})
	}
	onN1(first)
	// Past slurmctld's first passes over the allocation (the power-save
	// thread booted the node within a second).
	sc.AwaitRunTime(t, 3*time.Second)
	sc.Restart(t, nil)
	if _, err := sc.Command(ctx, "scancel", first); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Command(ctx, "scontrol", "release", next); err != nil {
		t.Fatal(err)
	}
	onN1(next)
}

func TestParseRunTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "0:03", want: 3 * time.Second},
		{in: "12:34", want: 12*time.Minute + 34*time.Second},
		{in: "1:02:03", want: time.Hour + 2*time.Minute + 3*time.Second},
		{in: "2-01:02:03", want: 49*time.Hour + 2*time.Minute + 3*time.Second},
		{in: "3", err: `run time "3": want [D-][H:]M:SS`},
		{in: "1:2:3:4", err: `run time "1:2:3:4": want [D-][H:]M:SS`},
		{in: "0:x3", err: `run time "0:x3": field "x3" is not a count`},
		{in: "a-01:02:03", err: `run time "a-01:02:03": days "a"`},
	} {
		got, err := slurmtest.ParseRunTime(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRunTime(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRunTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
