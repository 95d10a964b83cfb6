package topology_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// fieldPath is the shape of a JSON path a topology error names:
// sites[0].fabrics[0].servers[2].gpus.
var fieldPath = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\[[0-9]+\])*(\.[A-Za-z][A-Za-z0-9]*(\[[0-9]+\])*)*$`)

// FuzzTopology feeds the topology pipeline the API runs (Parse, Normalize,
// Validate) arbitrary documents and asserts:
//   - a refusal is one invalid_argument *domain.Error; one that lists
//     problems names a JSON path in each (Validate: a path into the
//     document's known fields) and leads with the first;
//   - what validates re-serialises (JSON and YAML), re-parses, normalizes
//     and validates to the same fingerprint;
//   - Normalize is idempotent, and stable against itself as the previous
//     topology (no address moves when the same file is applied again).
func FuzzTopology(f *testing.F) {
	small, err := os.ReadFile("testdata/generate-small.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	for _, o := range []topology.GenerateOptions{
		{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1},
		{Stripes: 2, ServersPerStripe: 2, GPUsPerServer: 4, Spines: 2, NVLinkDomainSize: 8, NOS: "junos"},
		{Stripes: 1, ServersPerStripe: 1, GPUsPerServer: 1, Spines: 1, GPUModel: "A100-80GB", NOS: "frr"},
	} {
		t, err := topology.Generate(o)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(t)
		f.Add(b)
		y, _ := yaml.Marshal(t)
		f.Add(y)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		topo, err := topology.Parse(in)
		if err != nil {
			checkTopologyError(t, "Parse", err, false)
			return
		}
		if err := topology.Normalize(topo, nil); err != nil {
			checkTopologyError(t, "Normalize", err, true)
			return
		}
		if derr := topology.Validate(topo); derr != nil {
			checkTopologyError(t, "Validate", derr, true)
			for _, d := range derr.Details {
				if !fieldPath.MatchString(d.Field) || d.Rule == "" {
					t.Fatalf("Validate detail %+v: want a JSON path and a rule id", d)
				}
			}
			return
		}
		fp := topology.Fingerprint(topo)

		// Normalize again: nothing moves.
		again := clone(t, topo)
		if err := topology.Normalize(again, nil); err != nil {
			t.Fatalf("second Normalize: %v", err)
		}
		if got := topology.Fingerprint(again); got != fp {
			t.Fatalf("Normalize is not idempotent: %s then %s", fp, got)
		}
		// The same file applied on top of itself keeps every address.
		same := clone(t, topo)
		if err := topology.Normalize(same, topo); err != nil {
			t.Fatalf("Normalize against itself: %v", err)
		}
		if got := topology.Fingerprint(same); got != fp {
			t.Fatalf("Normalize against itself moved something: %s then %s", fp, got)
		}

		js, err := json.Marshal(topo)
		if err != nil {
			t.Fatal(err)
		}
		ys, err := yaml.Marshal(topo)
		if err != nil {
			t.Fatal(err)
		}
		for form, doc := range map[string][]byte{"json": js, "yaml": ys} {
			re, err := topology.Parse(doc)
			if err != nil {
				t.Fatalf("a valid topology's %s does not parse: %v\n%s", form, err, doc)
			}
			if err := topology.Normalize(re, nil); err != nil {
				t.Fatalf("a valid topology's %s does not normalize: %v\n%s", form, err, doc)
			}
			if derr := topology.Validate(re); derr != nil {
				t.Fatalf("a valid topology's %s does not validate: %v\n%s", form, derr, doc)
			}
			if got := topology.Fingerprint(re); got != fp {
				t.Fatalf("%s round trip changed the topology: fingerprint %s, want %s\n%s", form, got, fp, doc)
			}
		}
	})
}

func clone(t *testing.T, topo *domain.Topology) *domain.Topology {
	t.Helper()
	b, err := json.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	var c domain.Topology
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// checkTopologyError asserts err is one invalid_argument *domain.Error
// whose Field is that of its first detail, and (needPath) names a path.
func checkTopologyError(t *testing.T, stage string, err error, needPath bool) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("%s: error %T (%v), want *domain.Error", stage, err, err)
	}
	if de.Code != domain.CodeInvalidArgument || de.Message == "" {
		t.Fatalf("%s: error %+v, want invalid_argument with a message", stage, de)
	}
	if len(de.Details) > 0 && de.Field != de.Details[0].Field {
		t.Fatalf("%s: error names %q but its first problem is at %q", stage, de.Field, de.Details[0].Field)
	}
	for _, d := range de.Details {
		// The root has the empty path: "the document must be an object".
		if (d.Field == "" && !strings.HasPrefix(d.Message, "the document ")) || d.Message == "" {
			t.Fatalf("%s: problem %+v names no path or says nothing", stage, d)
		}
	}
	if len(de.Details) > 100 {
		t.Fatalf("%s: %d problems listed, the cap is 100", stage, len(de.Details))
	}
	if needPath && !fieldPath.MatchString(de.Field) {
		t.Fatalf("%s: error field %q is not a JSON path: %v", stage, de.Field, err)
	}
}
