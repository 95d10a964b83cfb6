package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
)

// stops records the members' halt hooks.
type stops struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (s *stops) hook(node string) func(error) {
	return func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.errs[node] = append(s.errs[node], err)
	}
}

func (s *stops) of(node string) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs[node]...)
}

// waitCluster waits until the leader's /v1/cluster answer satisfies ok.
func waitCluster(t *testing.T, c *devcluster.Cluster, what string, ok func(api.ClusterView) bool) api.ClusterView {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	var last api.ClusterView
	for {
		if l := c.Leader(); l >= 0 {
			v, err := c.Client(l).Cluster(ctx)
			if err == nil && ok(*v) {
				return *v
			}
			if err == nil {
				last = *v
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 30s; last /v1/cluster: %+v", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func memberRules(v api.ClusterView) map[string]int {
	out := map[string]int{}
	for _, m := range v.Members {
		out[m.ID] = m.ApplyRules
	}
	return out
}

// sameStates waits until every running member has applied the same index
// and fails if members at the same index hold different states.
func sameStates(t *testing.T, c *devcluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	for {
		var idx []uint64
		var dig []string
		for i, s := range c.Servers {
			if s == nil {
				continue
			}
			n, d, err := s.State().Digest()
			if err != nil {
				t.Fatalf("server %d: %v", i+1, err)
			}
			idx, dig = append(idx, n), append(dig, d)
		}
		equal := true
		for i := range idx {
			equal = equal && idx[i] == idx[0]
		}
		if equal {
			for i := range dig {
				if dig[i] != dig[0] {
					t.Fatalf("members at index %d hold different states: %v", idx[0], dig)
				}
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("members did not reach the same index: %v", idx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRollingUpgradeWaitsForEveryMember: a 3-server cluster (real raft)
// of binaries that apply rules 1 only is upgraded one member at a time.
// While node3 still runs the old binary the leader proposes at 1: a globex
// submit with acme's live externalId is refused with rules 1's wording,
// which names nothing of acme's job. Once node3 is upgraded the leader
// learns it, proposes at 2, the same submit is accepted, and the three
// members' states are equal. A member downgraded again stops at the first
// entry above its rules, naming it, and applies nothing after it. (Before
// versions: every member applied its own binary's rule, and an entry it
// could not apply was refused and skipped.)
func TestRollingUpgradeWaitsForEveryMember(t *testing.T) {
	halted := &stops{errs: map[string][]error{}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 3, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second,
		Tune: func(cfg *server.Config) {
			cfg.Halt = halted.hook(cfg.NodeID)
			cfg.ApplyRules = state.RulesGlobalExternalID // the old binary
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, c.Client(leader))
	upgrade := func(i, rules int) {
		t.Helper()
		if err := c.Stop(i); err != nil {
			t.Fatal(err)
		}
		if err := c.RestartWith(ctx, i, func(cfg *server.Config) { cfg.ApplyRules = rules }); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upgrade(0, 0)
	upgrade(1, 0)
	v := waitCluster(t, c, "node3 recorded at rules 1", func(v api.ClusterView) bool {
		r := memberRules(v)
		return len(r) == 3 && r["node3"] == 1
	})
	if v.ApplyRules != state.RulesGlobalExternalID {
		t.Fatalf("with node3 at rules 1 the leader proposes at %d", v.ApplyRules)
	}
	leader, _ = c.WaitLeader(ctx)
	admin := c.Client(leader)
	admin.RetryFor = 20 * time.Second

	acmeJob, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1, ExternalID: "slurm:77"})
	if err != nil {
		t.Fatal(err)
	}
	globex := domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 1, ExternalID: "slurm:77"}
	_, err = admin.SubmitJob(ctx, globex)
	var derr *domain.Error
	if !errors.As(err, &derr) || derr.Code != domain.CodeAlreadyExists || derr.Field != "externalId" {
		t.Fatalf("globex's submit with acme's live id at rules 1: %v, want already_exists on externalId", err)
	}
	if !strings.Contains(derr.Message, "another live job already has externalId slurm:77") {
		t.Fatalf("not rules 1's wording: %s", derr.Message)
	}
	for _, leak := range []string{"acme", "research", fmt.Sprintf("job %d", acmeJob.ID)} {
		if strings.Contains(derr.Message, leak) {
			t.Fatalf("the refusal names acme's job (%q): %s", leak, derr.Message)
		}
	}
	// A dry run checks under the same rules.
	if _, err := admin.DryRun(ctx, globex); domain.CodeOf(err) != domain.CodeAlreadyExists {
		t.Fatalf("dry run of globex's submit at rules 1: %v", err)
	}
	sameStates(t, c)

	// Upgrade node3: an upgraded leader reads its /v1/health and records
	// the latest rules.
	upgrade(2, 0)
	v = waitCluster(t, c, "the latest rules in effect after node3's upgrade", func(v api.ClusterView) bool { return v.ApplyRules == state.RulesLatest })
	if r := memberRules(v); r["node3"] != state.RulesLatest {
		t.Fatalf("members' rules after the upgrade: %v", r)
	}
	leader, _ = c.WaitLeader(ctx)
	admin = c.Client(leader)
	admin.RetryFor = 20 * time.Second
	g, err := admin.SubmitJob(ctx, globex)
	if err != nil {
		t.Fatalf("globex's submit at rules 2: %v", err)
	}
	if g.Tenant != "globex" || g.ExternalID != "slurm:77" {
		t.Fatalf("globex's job: %+v", g)
	}
	sameStates(t, c)
	for _, n := range []string{"node1", "node2", "node3"} {
		if errs := halted.of(n); len(errs) != 0 {
			t.Fatalf("%s stopped: %v", n, errs)
		}
	}

	// Downgrade node3 again: its replay meets rules 2 entries (globex's
	// submit among them) and it stops at the first, applying nothing after.
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartWith(ctx, 2, func(cfg *server.Config) { cfg.ApplyRules = state.RulesGlobalExternalID }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(halted.of("node3")) == 0 && time.Now().Before(deadline) {
		select {
		case <-c.Servers[2].State().Changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
	errs := halted.of("node3")
	var u *state.UnappliableError
	if len(errs) != 1 || !errors.As(errs[0], &u) {
		t.Fatalf("the downgraded member's stops: %v, want one UnappliableError", errs)
	}
	if u.Rules != state.RulesLatest || u.MaxRules != state.RulesGlobalExternalID || u.UnknownType ||
		!strings.Contains(u.Error(), "upgrade this member's binary") {
		t.Fatalf("stop: %+v (%v)", *u, u)
	}
	st := c.Servers[2].State()
	if n := st.AppliedIndex(); n >= u.Index {
		t.Fatalf("the stopped member applied up to %d, at or past entry %d", n, u.Index)
	}
	if _, ok := st.Job(g.ID); ok {
		t.Fatalf("the stopped member holds globex's job %d, proposed at rules 2", g.ID)
	}
	if _, err := st.Snapshot(); err == nil {
		t.Fatal("the stopped member takes snapshots")
	}
}

// TestJoinRefusesAnOlderBinary: a server whose binary applies rules below
// the version a cluster proposes at is refused at join, naming both
// versions (the log holds entries it cannot apply: it would stop at the
// first).
func TestJoinRefusesAnOlderBinary(t *testing.T) {
	ctx := ctxT(t)
	_, err := devcluster.Start(ctx, t.TempDir(), 2, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second,
		Tune: func(cfg *server.Config) {
			if cfg.NodeID == "node2" {
				cfg.ApplyRules = state.RulesGlobalExternalID
			}
		}})
	if domain.CodeOf(err) != domain.CodeFailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf("node2 applies rules up to 1, and this cluster proposes at %d", state.RulesLatest)) {
		t.Fatalf("an older binary's join: %v, want failed_precondition naming both versions", err)
	}
}
