package server

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

type schemaInner struct {
	A int `json:"a"`
}

type schemaProbe struct {
	Plain     int              `json:"plain"`
	Omit      int              `json:"omit,omitempty"`
	OmitZero  time.Time        `json:"omitZero,omitzero"`
	Ptr       *int             `json:"ptr,omitempty"`
	NilPtr    *int             `json:"nilPtr"`
	Slice     []string         `json:"slice"`
	Map       map[string][]int `json:"map,omitempty"`
	StructOE  schemaInner      `json:"structOE,omitempty"` // omitempty never omits a struct
	Time      time.Time        `json:"time"`
	State     domain.JobState  `json:"state"`
	Asked     string           `json:"asked" openapi:"required"`
	Skipped   string           `json:"-"`
	unexposed int
	schemaInner
}

// TestSchemaRules: what the generator derives from a Go type: required
// fields in answers (always written) and requests (tagged), nullability,
// formats, enums, flattened embedding, and names unique per Go type.
func TestSchemaRules(t *testing.T) {
	g := newSchemaGen()
	probe := reflect.TypeOf(schemaProbe{})
	g.collect(probe, false)
	g.collect(probe, true)
	g.collect(reflect.TypeOf(binding.NIC{}), false)
	g.collect(reflect.TypeOf(domain.NIC{}), false)
	g.assignNames()
	g.schema(probe, false)
	g.schema(probe, true)

	out := g.defs["schemaProbe"].(map[string]any)
	in := g.defs["schemaProbeInput"].(map[string]any)
	if got, want := out["required"], []any{"plain", "nilPtr", "slice", "structOE", "time", "state", "asked", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("answer required %v, want %v", got, want)
	}
	if got, want := in["required"], []any{"asked"}; !reflect.DeepEqual(got, want) {
		t.Errorf("request required %v, want %v", got, want)
	}
	if in["additionalProperties"] != false {
		t.Error("a request form allows unknown fields the decoder refuses")
	}
	props := out["properties"].(map[string]any)
	for _, k := range []string{"Skipped", "unexposed", "-"} {
		if _, ok := props[k]; ok {
			t.Errorf("property %s is not written by encoding/json", k)
		}
	}
	check := func(name string, want map[string]any) {
		t.Helper()
		if got := props[name]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("nilPtr", map[string]any{"type": "integer", "format": "int64", "nullable": true})
	check("ptr", map[string]any{"type": "integer", "format": "int64"})
	check("slice", map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "nullable": true})
	check("map", map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "array", "items": map[string]any{"type": "integer", "format": "int64"}, "nullable": true}})
	check("time", map[string]any{"type": "string", "format": "date-time"})
	check("state", map[string]any{"$ref": "#/components/schemas/JobState"})
	if got := g.defs["JobState"].(map[string]any)["enum"]; len(got.([]any)) != len(domain.JobStates) {
		t.Errorf("JobState enum %v, want the %d states", got, len(domain.JobStates))
	}

	var nics []string
	for typ, name := range g.names {
		if typ.Name() == "NIC" {
			nics = append(nics, name)
		}
	}
	slices.Sort(nics)
	if !reflect.DeepEqual(nics, []string{"BindingNIC", "DomainNIC"}) {
		t.Errorf("NIC schemas named %v, want BindingNIC and DomainNIC", nics)
	}
}
