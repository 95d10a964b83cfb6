package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"
)

// strict decodes one YAML document into v, refusing unknown fields (the
// way the API server's strict field validation does).
func strict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// kueueLevelRules are the validation markers of Kueue's TopologySpec.Levels
// and TopologyLevel.NodeLabel (apis/kueue/v1beta2/topology_types.go in
// sigs.k8s.io/kueue v0.17.0): 1..16 levels, unique, kubernetes.io/hostname
// only as the last, a qualified label name.
func kueueLevelRules(top *kueue.Topology) []string {
	var errs []string
	lv := top.Spec.Levels
	if len(lv) < 1 || len(lv) > 16 {
		errs = append(errs, fmt.Sprintf("%d levels, want 1..16", len(lv)))
	}
	seen := map[string]bool{}
	for i, l := range lv {
		if seen[l.NodeLabel] {
			errs = append(errs, "level "+l.NodeLabel+" repeated")
		}
		seen[l.NodeLabel] = true
		if l.NodeLabel == LabelHostname && i != len(lv)-1 {
			errs = append(errs, "kubernetes.io/hostname is not the lowest level")
		}
		for _, m := range validation.IsQualifiedName(l.NodeLabel) {
			errs = append(errs, l.NodeLabel+": "+m)
		}
	}
	for _, m := range validation.IsDNS1123Subdomain(top.Name) {
		errs = append(errs, "name "+top.Name+": "+m)
	}
	return errs
}

func TestKueueOutputDecodesStrictlyIntoKueueTypes(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			out, err := Render(generated(t, sh.stripes, sh.servers, sh.gpus, sh.nv), FormatKueue, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ds := docs(out)
			var top kueue.Topology
			if err := strict(ds[0], &top); err != nil {
				t.Fatalf("Topology does not decode strictly into kueue v1beta2.Topology: %v", err)
			}
			if top.APIVersion != kueue.GroupVersion.String() || top.Kind != "Topology" {
				t.Fatalf("apiVersion/kind = %s/%s, want %s/Topology", top.APIVersion, top.Kind, kueue.GroupVersion)
			}
			for _, e := range kueueLevelRules(&top) {
				t.Error(e)
			}
			if got := len(ds) - 1; got != sh.stripes*sh.servers {
				t.Fatalf("%d Node documents, want one per server (%d)", got, sh.stripes*sh.servers)
			}
			domains := map[string]bool{}
			for _, d := range ds[1:] {
				var n corev1.Node
				if err := strict(d, &n); err != nil {
					t.Fatalf("Node does not decode strictly into core/v1 Node: %v\n%s", err, d)
				}
				if n.APIVersion != "v1" || n.Kind != "Node" || n.Name == "" {
					t.Fatalf("not a named v1 Node: %s", d)
				}
				for k, v := range n.Labels {
					for _, m := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
						t.Errorf("node %s label %s=%s: %s", n.Name, k, v, m)
					}
				}
				// TAS puts a node in a domain by the values of every level:
				// a node missing one is left out of the topology.
				var path []string
				for _, l := range top.Spec.Levels {
					if l.NodeLabel == LabelHostname {
						continue
					}
					v, ok := n.Labels[l.NodeLabel]
					if !ok {
						t.Errorf("node %s has no %s label, a level of the Topology", n.Name, l.NodeLabel)
					}
					path = append(path, v)
				}
				domains[strings.Join(path, "/")] = true
			}
			want := sh.stripes
			if sh.nv > 0 {
				want = sh.stripes * sh.servers * sh.gpus / sh.nv
			}
			if len(domains) != want {
				t.Errorf("%d lowest domains above the host, want %d: %v", len(domains), want, domains)
			}
		})
	}
}

func TestStrictDecodeCatchesAWrongField(t *testing.T) {
	// The check is not vacuous: Kueue's old field name, or a level under
	// the wrong key, is refused.
	bad := []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: x}\nspec:\n  levels:\n  - label: jobfabric.io/site\n")
	if err := strict(bad, &kueue.Topology{}); err == nil {
		t.Fatal("a level with an unknown field decoded")
	}
	if err := strict([]byte("spec:\n  tier: 1\n  member: []\n"), &volcanoHyperNode{}); err == nil {
		t.Fatal("a HyperNode with an unknown field decoded")
	}
}

// volcanoHyperNode mirrors the schema of Volcano's HyperNode CRD
// (config/crd/volcano/bases/topology.volcano.sh_hypernodes.yaml in
// volcano-sh/volcano, v1alpha1): volcano.sh/apis is not among the modules
// this project may add, so the test decodes into these types and checks
// the CRD's rules itself (checkHyperNode).
type volcanoHyperNode struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Tier     *int    `json:"tier"`
		TierName *string `json:"tierName"`
		Members  []struct {
			Type     string `json:"type"`
			Selector *struct {
				ExactMatch *struct {
					Name string `json:"name"`
				} `json:"exactMatch"`
				RegexMatch *struct {
					Pattern string `json:"pattern"`
				} `json:"regexMatch"`
				LabelMatch *json.RawMessage `json:"labelMatch"`
			} `json:"selector"`
		} `json:"members"`
	} `json:"spec"`
}

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkHyperNode applies the CRD's rules: tier required and >= 0; tierName
// at most 253; at least one member; type Node or HyperNode; exactly one of
// exactMatch, regexMatch, labelMatch; exactMatch.name a DNS subdomain of
// 1..253 characters.
func checkHyperNode(h *volcanoHyperNode) []string {
	var errs []string
	if h.APIVersion != VolcanoAPIVersion || h.Kind != "HyperNode" {
		errs = append(errs, "apiVersion/kind "+h.APIVersion+"/"+h.Kind)
	}
	if len(validation.IsDNS1123Subdomain(h.Metadata.Name)) > 0 {
		errs = append(errs, "name "+h.Metadata.Name+" is not a DNS subdomain")
	}
	if h.Spec.Tier == nil || *h.Spec.Tier < 0 {
		errs = append(errs, "spec.tier missing or negative")
	}
	if h.Spec.TierName != nil && len(*h.Spec.TierName) > 253 {
		errs = append(errs, "spec.tierName longer than 253")
	}
	if len(h.Spec.Members) < 1 {
		errs = append(errs, "spec.members empty")
	}
	for i, m := range h.Spec.Members {
		if m.Type != "Node" && m.Type != "HyperNode" {
			errs = append(errs, fmt.Sprintf("members[%d].type %q", i, m.Type))
		}
		s := m.Selector
		if s == nil {
			errs = append(errs, fmt.Sprintf("members[%d] has no selector", i))
			continue
		}
		n := 0
		for _, set := range []bool{s.ExactMatch != nil, s.RegexMatch != nil, s.LabelMatch != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Sprintf("members[%d] has %d selectors, want exactly one", i, n))
		}
		if e := s.ExactMatch; e != nil && (len(e.Name) < 1 || len(e.Name) > 253 || !dnsSubdomain.MatchString(e.Name)) {
			errs = append(errs, fmt.Sprintf("members[%d].selector.exactMatch.name %q is not a DNS subdomain", i, e.Name))
		}
	}
	return errs
}

func TestVolcanoOutputMatchesTheHyperNodeCRD(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			out, err := Render(generated(t, sh.stripes, sh.servers, sh.gpus, sh.nv), FormatVolcano, Options{})
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*volcanoHyperNode{}
			inTier1 := map[string]int{}
			var order []string
			for _, d := range docs(out) {
				h := &volcanoHyperNode{}
				if err := strict(d, h); err != nil {
					t.Fatalf("HyperNode does not decode strictly: %v\n%s", err, d)
				}
				for _, e := range checkHyperNode(h) {
					t.Errorf("%s: %s", h.Metadata.Name, e)
				}
				if byName[h.Metadata.Name] != nil {
					t.Errorf("HyperNode %s twice", h.Metadata.Name)
				}
				byName[h.Metadata.Name] = h
				order = append(order, h.Metadata.Name)
				for _, m := range h.Spec.Members {
					switch m.Type {
					case "Node":
						if *h.Spec.Tier != 1 {
							t.Errorf("%s (tier %d) has a Node member: Nodes belong to tier 1", h.Metadata.Name, *h.Spec.Tier)
						}
						inTier1[m.Selector.ExactMatch.Name]++
					case "HyperNode":
						c := byName[m.Selector.ExactMatch.Name]
						if c == nil {
							t.Errorf("%s names HyperNode %s before it is written (or never)", h.Metadata.Name, m.Selector.ExactMatch.Name)
						} else if *c.Spec.Tier != *h.Spec.Tier-1 {
							t.Errorf("%s (tier %d) holds %s of tier %d", h.Metadata.Name, *h.Spec.Tier, c.Metadata.Name, *c.Spec.Tier)
						}
					}
				}
			}
			if len(inTier1) != sh.stripes*sh.servers {
				t.Errorf("%d servers in tier 1, want %d", len(inTier1), sh.stripes*sh.servers)
			}
			for n, k := range inTier1 {
				if k != 1 {
					t.Errorf("node %s is in %d tier-1 HyperNodes", n, k)
				}
			}
			if !slices.IsSorted(tiers(order, byName)) {
				t.Errorf("HyperNodes not written lowest tier first: %v", order)
			}
		})
	}
}

func tiers(order []string, by map[string]*volcanoHyperNode) []int {
	var t []int
	for _, n := range order {
		t = append(t, *by[n].Spec.Tier)
	}
	return t
}
