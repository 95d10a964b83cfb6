package topology

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const parseBase = `apiVersion: jobfabric/v1
kind: Topology
sites:
- name: dc1
  fabrics:
  - name: f1
    railOptimized: false
    spines: []
    leaves:
    - {name: l1, asn: 65001, loopback: 10.254.0.1, portCount: 32, stripe: 1, rail: 0}
    servers:
    - {name: a, stripe: 1, gpuModel: H100-80GB, gpus: 1, nics: [{name: nic0, rail: 0, numa: 0, gpu: 0}]}
    - {name: b, stripe: 1, gpuModel: H100-80GB, gpus: 1, nics: []}
    - name: c
      stripe: 1
      gpuModel: H100-80GB
      gpus: 8
      nics: []
    cables:
    - {server: a, nic: nic0, leaf: l1, port: swp1}
`

func TestParse(t *testing.T) {
	type want struct {
		field, rule string
		msg         string // substring of the error message
	}
	cases := map[string]struct {
		doc  string
		want *want // nil: parses
	}{
		"valid yaml": {doc: parseBase},
		"valid json with tabs": {
			doc: "{\n\t\"sites\": [\n\t\t{\"name\": \"dc1\", \"fabrics\": []}\n\t]\n}\n",
		},
		"leading document marker": {doc: "---\n" + parseBase},
		"unknown field in a server": {
			doc:  strings.Replace(parseBase, "      gpus: 8\n", "      gpu: 8\n", 1),
			want: &want{"sites[0].fabrics[0].servers[2].gpu", "unknown-field", `unknown field "gpu" in sites[0].fabrics[0].servers[2] (did you mean "gpus"?)`},
		},
		"unknown field at the top": {
			doc:  parseBase + "sitez: []\n",
			want: &want{"sitez", "unknown-field", `unknown field "sitez" at the top level (did you mean "sites"?)`},
		},
		"field in the wrong case": {
			doc:  strings.Replace(parseBase, "railOptimized", "railoptimized", 1),
			want: &want{"sites[0].fabrics[0].railoptimized", "unknown-field", `(did you mean "railOptimized"?)`},
		},
		"wrong type: string for an integer": {
			doc:  strings.Replace(parseBase, "      gpus: 8\n", "      gpus: \"8\"\n", 1),
			want: &want{"sites[0].fabrics[0].servers[2].gpus", "type", `must be an integer, not the string "8"`},
		},
		"wrong type: object for a list": {
			doc:  strings.Replace(parseBase, "    spines: []\n", "    spines: {}\n", 1),
			want: &want{"sites[0].fabrics[0].spines", "type", "must be a list, not an object"},
		},
		"wrong type: number for a name": {
			doc:  strings.Replace(parseBase, "    - name: c\n", "    - name: 001\n", 1),
			want: &want{"sites[0].fabrics[0].servers[2].name", "type", "quote the value"},
		},
		"wrong type: yaml boolean for a string": {
			doc:  strings.Replace(parseBase, "{name: l1,", "{name: l1, nos: no,", 1),
			want: &want{"sites[0].fabrics[0].leaves[0].nos", "type", "the boolean false"},
		},
		"wrong type: string for a bool": {
			doc:  strings.Replace(parseBase, "railOptimized: false", "railOptimized: maybe", 1),
			want: &want{"sites[0].fabrics[0].railOptimized", "type", `must be true or false, not the string "maybe"`},
		},
		"fraction for an integer": {
			doc:  strings.Replace(parseBase, "stripe: 1, rail: 0", "stripe: 1.5, rail: 0", 1),
			want: &want{"sites[0].fabrics[0].leaves[0].stripe", "type", "whole number, not 1.5"},
		},
		"negative asn": {
			doc:  strings.Replace(parseBase, "asn: 65001", "asn: -1", 1),
			want: &want{"sites[0].fabrics[0].leaves[0].asn", "type", "between 0 and 4294967295"},
		},
		"asn too large": {
			doc:  strings.Replace(parseBase, "asn: 65001", "asn: 5000000000", 1),
			want: &want{"sites[0].fabrics[0].leaves[0].asn", "type", "is 5000000000"},
		},
		"document is a list": {
			doc:  "- a\n- b\n",
			want: &want{"", "type", "the document must be an object, not a list"},
		},
		"malformed yaml": {
			doc:  "sites:\n  - name: dc1\n   fabrics: [\n",
			want: &want{"", "", "malformed topology document"},
		},
		"duplicate key": {
			doc:  "sites: []\nsites: []\n",
			want: &want{"", "", `"sites" already set`},
		},
		"duplicate key in json": {
			doc:  `{"sites": [], "sites": []}`,
			want: &want{"", "", `line 1: key "sites" already set in map`},
		},
		"unknown field in a cable of a json document": {
			doc:  `{"sites": [{"name": "dc1", "fabrics": [{"name": "f", "cables": [{"server": "a", "nick": "x"}]}]}]}`,
			want: &want{"sites[0].fabrics[0].cables[0].nick", "unknown-field", `(did you mean "nic"?)`},
		},
		"two documents": {
			doc:  parseBase + "---\n" + parseBase,
			want: &want{"", "", "2 YAML documents"},
		},
		"empty": {
			doc:  "  \n# nothing\n",
			want: &want{"", "", "empty"},
		},
		"null document": {
			doc:  "null\n",
			want: &want{"", "", "empty"},
		},
		"api version": {
			doc:  strings.Replace(parseBase, "jobfabric/v1", "jobfabric/v9", 1),
			want: &want{"apiVersion", "", `"jobfabric/v9"`},
		},
		"kind": {
			doc:  strings.Replace(parseBase, "kind: Topology", "kind: Tenant", 1),
			want: &want{"kind", "", `"Tenant"`},
		},
		"no api version is fine": {doc: strings.Replace(parseBase, "apiVersion: jobfabric/v1\nkind: Topology\n", "", 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Parse() error = %v", err)
				}
				if got == nil {
					t.Fatal("Parse() = nil")
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse() = %+v; want an error at %q", got, tc.want.field)
			}
			de := asDomain(t, err)
			if de.Field != tc.want.field {
				t.Errorf("field = %q; want %q (%v)", de.Field, tc.want.field, de)
			}
			if !strings.Contains(de.Message, tc.want.msg) {
				t.Errorf("message = %q; want it to contain %q", de.Message, tc.want.msg)
			}
			if tc.want.rule != "" && !hasDetail(de, tc.want.rule, tc.want.field) {
				t.Errorf("no detail %s @ %s:%s", tc.want.rule, tc.want.field, describeDetails(de))
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	doc := strings.Replace(parseBase, "      gpus: 8\n", "      gpus: eight\n      color: red\n", 1)
	doc = strings.Replace(doc, "portCount: 32", "ports: 32", 1)
	_, err := Parse([]byte(doc))
	de := asDomain(t, err)
	for _, w := range []struct{ rule, field string }{
		{"unknown-field", "sites[0].fabrics[0].leaves[0].ports"},
		{"unknown-field", "sites[0].fabrics[0].servers[2].color"},
		{"type", "sites[0].fabrics[0].servers[2].gpus"},
	} {
		if !hasDetail(de, w.rule, w.field) {
			t.Errorf("no detail %s @ %s:%s", w.rule, w.field, describeDetails(de))
		}
	}
	if !strings.HasPrefix(de.Message, "topology document has 3 problems; first: ") {
		t.Errorf("message = %q", de.Message)
	}
}

// A generated topology written as YAML or JSON parses back to the same value.
func TestParseRoundTrip(t *testing.T) {
	want, err := Generate(GenerateOptions{Stripes: 2, ServersPerStripe: 3, GPUsPerServer: 4, NVLinkDomainSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{"yaml": y, "json": j} {
		got, err := Parse(doc)
		if err != nil {
			t.Fatalf("%s: Parse() error = %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: round trip changed the topology", name)
		}
		if Fingerprint(got) != Fingerprint(want) {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
}
