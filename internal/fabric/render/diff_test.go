package render_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// withJob23 starts job 23 of globex (segmented) on GPU 1 of s2-gpu004,
// behind port 4 of s2-leaf1.
func withJob23(in fabric.Input) fabric.Input {
	in.Allocations = append(append([]fabric.Allocation(nil), in.Allocations...),
		fabric.Allocation{Tenant: "globex", Server: "s2-gpu004", GPUs: []int{1}, JobID: "23"})
	in.Groups = append(append([]fabric.Group(nil), in.Groups...), fabric.Group{Tenant: "globex", Name: "job-23", ID: 103, JobID: "23"})
	return in
}

// TestJobStartDiff renders the fabric before and after a job starts, for
// every NOS: only the leaf behind the job's port changes, only in lines of
// that port and its group; the reverse diff stops the job. The diffs are
// kept as golden files (testdata/diff/job-start.<nos>.golden) so reviewers
// see what an operator would.
func TestJobStartDiff(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		t.Run(nos, func(t *testing.T) {
			in, err := fabrictest.Input(nos, fabrictest.Segmented)
			if err != nil {
				t.Fatal(err)
			}
			before := renderInput(t, in)
			after := renderInput(t, withJob23(in))
			diff := render.Diff(before, after)
			if len(diff) != 1 || diff[0].Device != "s2-leaf1" {
				var devs []string
				for _, d := range diff {
					devs = append(devs, d.Device)
				}
				t.Fatalf("devices changed: %v, want only s2-leaf1", devs)
			}
			port := fabrictest.PortName(nos, 4)
			var text strings.Builder
			for _, f := range diff[0].Files {
				for _, l := range f.Lines {
					if !mentionsJob(l, port) {
						t.Errorf("%s: a changed line is not about port %s or group 103: %q", f.Name, port, l)
					}
				}
			}
			text.WriteString(diff[0].String())
			golden(t, filepath.Join("testdata", "diff", "job-start."+nos+".golden"), text.String())

			// Stopping the job is the same change backwards.
			back := render.Diff(after, before)
			if len(back) != 1 || back[0].Device != "s2-leaf1" {
				t.Fatalf("stopping the job changes %v", back)
			}
		})
	}
}

func renderInput(t *testing.T, in fabric.Input) []render.DeviceFiles {
	t.Helper()
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return renderAll(t, it)
}

// mentionsJob accepts a diff line that is about the job's port (by name, by
// its filter/ACL name, by its link prefixes) or the job's group, or is a hunk
// header / JSON punctuation of such a change.
func mentionsJob(l, port string) bool {
	san := strings.NewReplacer("/", "-", ":", "-", ".", "-").Replace(port)
	for _, s := range []string{port, san, "103", "job-23", "10.0.0.30/31", "fd00:0:0:1::1e/127", "fe80::/10", "ff02::/16"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	t := strings.TrimSpace(strings.TrimLeft(l, "+-"))
	switch {
	case strings.HasPrefix(l, "@@"):
		return true
	case t == "" || t == "}" || t == "}," || t == "]" || t == "]," || t == "!" || t == "exit" || t == "{":
		return true
	}
	// Fields of a JSON object or stanza lines whose key the hunk names.
	for _, s := range []string{`"PACKET_ACTION"`, `"PRIORITY"`, `"IP_TYPE"`, `"IP_PROTOCOL"`, `"DST_IP`, `"SRC_IP`, `"policy_desc"`, `"stage"`, `"type"`, `"ports"`, `"vrf_name"`,
		"description ", `"description"`, `"admin_status"`, "shutdown", "mtu ", "no switchport", "vrf member globex", "vrf globex", "ip address", "ipv6 address", "ipv6 enable", "permit ", "deny ", "access-group", "match connected-endpoints"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if intended):\n%s", path, strings.Join(render.DiffFile(path, string(want), got), "\n"))
	}
}

func TestDiffAddsAndRemovesDevicesAndFiles(t *testing.T) {
	a := []render.DeviceFiles{{Device: "l1", NOS: "frr", Files: []render.File{{Name: "frr.conf", Content: "x\n"}, {Name: "gbp-a.nft", Content: "y\n"}}}}
	b := []render.DeviceFiles{
		{Device: "l1", NOS: "frr", Files: []render.File{{Name: "frr.conf", Content: "x\n"}}},
		{Device: "l2", NOS: "junos", Files: []render.File{{Name: "junos.set", Content: "# c\nset a b\n"}}},
	}
	got := render.Diff(a, b)
	want := []render.DeviceDiff{
		{Device: "l1", NOS: "frr", Files: []render.FileDiff{{Name: "gbp-a.nft", Change: "removed", Lines: []string{"@@ -1,1 +0,0 @@", "-y"}}}},
		{Device: "l2", NOS: "junos", Files: []render.FileDiff{{Name: "junos.set", Change: "added", Lines: []string{"set a b"}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if render.Diff(b, b) != nil {
		t.Error("a render differs from itself")
	}
}
