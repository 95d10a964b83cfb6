package verify_test

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/reports.golden with the reports the code gives now")

// TestReportsMatchGolden verifies a scale intent broken at random in 96
// ways and compares each whole report (every check, failure, order and
// count, by digest of its JSON) with testdata/reports.golden, written by
// the verifier as it was before issue 18's later pass (main 73645b3, with
// this file and mutate_test.go copied in and -rewrite): the optimisations
// of every check, not only job isolation, must not change a report.
func TestReportsMatchGolden(t *testing.T) {
	base, compiled := scaleIntent(t)
	var b strings.Builder
	for seed := range uint64(96) {
		in, it := base, cloneIntent(*compiled)
		in.Contracts, in.Allocations = slices.Clone(base.Contracts), slices.Clone(base.Allocations)
		what := breakAny(rand.New(rand.NewPCG(seed, 1818)), &in, &it)
		r := verify.Verify(in, &it)
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		failures := 0
		for _, c := range r.Checks {
			failures += len(c.Failures) + c.Omitted
		}
		fmt.Fprintf(&b, "%2d %x %5d %s:%s\n", seed, sha256.Sum256(js), failures, strings.Join(r.Rules(), ","), what)
	}
	const file = "testdata/reports.golden"
	if *rewrite {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Errorf("report differs from the golden one:\n got %s\nwant %s", gl[i], wl[i])
			}
		}
	}
}
