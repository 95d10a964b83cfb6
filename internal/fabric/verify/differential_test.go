package verify_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// sameReport fails t unless Verify and the reference implementation of
// job isolation (verify.VerifyReference, the check as it was on main
// 73645b3) give the same report: every check, failure, order and count.
func sameReport(t *testing.T, what string, in fabric.Input, it *fabric.Intent) *verify.Report {
	t.Helper()
	got, want := verify.Verify(in, it), verify.VerifyReference(in, it)
	if !reflect.DeepEqual(got, want) {
		g, w := got.Check(verify.CheckJobIsolation), want.Check(verify.CheckJobIsolation)
		t.Errorf("%s: the report differs from the reference's\njob-isolation: %d failures, %d omitted, ok %v; reference: %d failures, %d omitted, ok %v\n%s\nreference:\n%s",
			what, len(g.Failures), g.Omitted, g.OK, len(w.Failures), w.Omitted, w.OK, got.Text(5), want.Text(5))
	}
	return got
}

// TestJobIsolationMatchesReference runs Verify and the reference on
// correct intents and on scale intents broken at random where job
// isolation looks (policy contracts, groups, ACLs, policies, input
// contracts), and compares whole reports. TestMutations compares them on
// each of its mutations too.
func TestJobIsolationMatchesReference(t *testing.T) {
	eachScenario(t, func(nos, model string, in fabric.Input, it *fabric.Intent) {
		sameReport(t, nos+" "+model, in, it)
	})
	// Jobs 21 and 22 of globex contracted in the input and the intent:
	// their links may talk, nothing fails.
	in, it := fixture(t)
	in.Contracts = append(in.Contracts, fabric.Contract{Tenant: "globex", A: "job-21", B: "job-22"})
	for i := range it.Devices {
		if v := it.Devices[i].VRF("globex"); v != nil {
			v.Policy.Contracts = append(v.Policy.Contracts, fabric.PolicyContract{A: 101, B: 102})
		}
	}
	if r := sameReport(t, "contract two jobs", in, it); !r.OK() {
		t.Errorf("two contracted jobs fail:\n%s", r)
	}
	base, compiled := scaleIntent(t)
	if r := sameReport(t, "scale", base, compiled); !r.OK() {
		t.Fatalf("scale intent fails: %s", r)
	}
	failing := 0
	for seed := range uint64(48) {
		in, it := base, cloneIntent(*compiled)
		in.Contracts = slices.Clone(base.Contracts)
		rng := rand.New(rand.NewPCG(seed, 18))
		what := breakJobs(rng, &in, &it)
		r := sameReport(t, what, in, &it)
		if !r.Check(verify.CheckJobIsolation).OK {
			failing++
		}
	}
	// The comparison must have seen violations, not only clean reports.
	t.Logf("%d of 48 broken intents fail job isolation", failing)
	if failing < 16 {
		t.Errorf("only %d of 48 broken intents fail job isolation", failing)
	}
}
