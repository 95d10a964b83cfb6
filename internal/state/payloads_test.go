package state

import (
	"encoding"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var updatePayloads = flag.Bool("update", false, "rewrite testdata/payloads.golden with the command payloads' fields as they are now")

// payloadOf is every command type's payload: TestPayloadFieldsAreVersioned
// fails when a handler has none here.
var payloadOf = map[CommandType]any{
	CmdTopologyApply: TopologyApply{}, CmdTenantCreate: TenantCreate{}, CmdTenantDelete: TenantDelete{},
	CmdTenantUpdate: TenantUpdate{}, CmdWorkspaceCreate: WorkspaceCreate{}, CmdWorkspaceUpdate: WorkspaceUpdate{},
	CmdWorkspaceDelete: WorkspaceDelete{}, CmdTokenCreate: TokenCreate{}, CmdTokenDelete: TokenDelete{},
	CmdTokensUsed: TokensUsed{}, CmdJobSubmit: JobSubmit{}, CmdJobCancel: JobCancel{}, CmdJobsPlace: JobsPlace{},
	CmdPlanApply: PlanApply{}, CmdMemberSet: MemberSet{}, CmdJobReport: JobReport{}, CmdJobsPreempt: JobsPreempt{},
	CmdJobsRelease: JobsRelease{}, CmdNodeSet: NodeSet{}, CmdFabricRevision: FabricRevisionCmd{},
	CmdFabricDeployed: FabricDeployedCmd{}, CmdFabricOptions: FabricOptionsSet{}, CmdFabricOverride: FabricOverrideCmd{},
	CmdHostReport: HostReport{}, CmdHostHeartbeat: HostHeartbeat{}, CmdHostAccept: HostAccept{},
	CmdHostPolicy: HostPolicySet{}, CmdJobsPathHealth: JobsPathHealth{}, CmdRetain: Retain{}, CmdNodeRuntime: NodeRuntime{},
	CmdPoolSet: PoolSet{}, CmdJobPool: JobPool{},
}

// TestPayloadFieldsAreVersioned pins the JSON fields of every command
// type's payload, nested, and the envelope's. A binary that does not know
// a field drops it (encoding/json) and applies the entry without its
// meaning, and one that does not know a command type stops: so a new
// field that apply reads, or a new command type, is a change of the apply
// rules (rules.go): bump RulesLatest, branch on Command.rules() where the
// new field is read, then run this test with -update. A field apply never
// reads (a message kept for the record) needs no bump; say so in the
// commit.
func TestPayloadFieldsAreVersioned(t *testing.T) {
	for ct := range handlers {
		if _, ok := payloadOf[ct]; !ok {
			t.Errorf("command type %s has no payload in payloadOf: a new command type is a change of the apply rules (rules.go)", ct)
		}
	}
	var b strings.Builder
	b.WriteString("# The JSON fields of the log's command envelope and every payload.\n")
	b.WriteString("# A change here is a change of the apply rules: see TestPayloadFieldsAreVersioned.\n")
	for _, line := range jsonFields("envelope", reflect.TypeFor[Command](), nil) {
		b.WriteString(line + "\n")
	}
	for _, ct := range slices.Sorted(maps.Keys(payloadOf)) {
		for _, line := range jsonFields(string(ct), reflect.TypeOf(payloadOf[ct]), nil) {
			b.WriteString(line + "\n")
		}
	}
	const golden = "testdata/payloads.golden"
	if *updatePayloads {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Fatalf("the log's payload fields changed. A binary that does not know a field applies the entry without it, so a field apply reads is "+
			"a change of the apply rules: bump RulesLatest and branch on Command.rules() (rules.go); then go test ./internal/state -run TestPayloadFieldsAreVersioned -update.\n%s",
			lineDiff(string(want), got))
	}
}

// jsonFields lists path: kind for every JSON field reachable from t.
// Types that encode themselves (time.Time, json.RawMessage) are leaves.
func jsonFields(path string, t reflect.Type, seen []reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	marshaler := reflect.TypeFor[json.Marshaler]()
	textMarshaler := reflect.TypeFor[encoding.TextMarshaler]()
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) || t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return []string{path + ": " + t.String()}
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return jsonFields(path+"[]", t.Elem(), seen)
	case reflect.Map:
		return jsonFields(path+"{}", t.Elem(), seen)
	case reflect.Struct:
	default:
		return []string{path + ": " + t.Kind().String()}
	}
	if slices.Contains(seen, t) {
		return []string{path + ": " + t.String() + " (recursive)"}
	}
	seen = append(seen, t)
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(path, f.Type, seen)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonFields(path+"."+name, f.Type, seen)...)
	}
	return out
}

// lineDiff lists the lines only one side has.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
