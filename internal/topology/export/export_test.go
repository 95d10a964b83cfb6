package export

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/datadriven"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// generated is topology.Generate's cluster for a case's arguments.
func generated(t *testing.T, stripes, servers, gpus, nvl int) *domain.Topology {
	t.Helper()
	top, err := topology.Generate(topology.GenerateOptions{Stripes: stripes, ServersPerStripe: servers, GPUsPerServer: gpus, NVLinkDomainSize: nvl})
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, c *datadriven.Case) string {
			atoi := func(k string) int {
				var n int
				fmt.Sscan(c.Args.Get(k, "0"), &n)
				return n
			}
			top := generated(t, atoi("stripes"), atoi("servers"), atoi("gpus"), atoi("nvlink"))
			out, err := Render(top, c.Args.Get("format", ""), Options{})
			if err != nil {
				return "error: " + err.Error()
			}
			return string(out)
		})
	})
}

// docs splits a YAML stream into its documents.
func docs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// shapes are the clusters every format is checked on: one stripe, several,
// NVL72-class domains (18 servers x 4 GPUs), a stripe too long for one
// topology.conf line without hostlist compression.
var shapes = []struct {
	name                       string
	stripes, servers, gpus, nv int
}{
	{"1x2x8", 1, 2, 8, 0},
	{"3x4x8", 3, 4, 8, 0},
	{"nvl72", 2, 18, 4, 72},
	{"long-stripe", 1, 200, 8, 0},
}

func TestRenderRejectsAnUnknownFormat(t *testing.T) {
	_, err := Render(generated(t, 1, 1, 1, 0), "lsf", Options{})
	if err == nil || !strings.Contains(err.Error(), `"lsf"`) || !strings.Contains(err.Error(), "kueue") {
		t.Fatalf("err = %v, want the format named and the known ones listed", err)
	}
}

func TestBuildRefusesNamesThatCollide(t *testing.T) {
	top := generated(t, 1, 1, 1, 0)
	// Two fabrics whose names differ only by case export as one object name.
	f := top.Sites[0].Fabrics[0]
	g := f
	g.Name = strings.ToUpper(f.Name)
	top.Sites[0].Fabrics = append(top.Sites[0].Fabrics, g)
	if _, err := Build(top); err == nil || !strings.Contains(err.Error(), "both export as") {
		t.Fatalf("err = %v, want a collision named", err)
	}
}

func TestHostlist(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"gpu001", "gpu002", "gpu003"}, "gpu[001-003]"},
		{[]string{"gpu001", "gpu003", "gpu004", "gpu010"}, "gpu[001,003-004,010]"},
		{[]string{"gpu9", "gpu10", "gpu11"}, "gpu9,gpu[10-11]"},
		{[]string{"a", "b1"}, "a,b1"},
		{[]string{"s1-gpu001", "s2-gpu001"}, "s1-gpu001,s2-gpu001"},
		{[]string{"x-stripe1", "x-stripe2", "x"}, "x-stripe[1-2],x"},
	} {
		if got := Hostlist(c.in); got != c.want {
			t.Errorf("Hostlist(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSlurmLinesFitSlurm: Slurm reads topology.conf lines of at most 1024
// characters (topology.conf(5) of 22.05); hostlist compression keeps a
// 200-server stripe on one short line, and every switch has a line.
func TestSlurmLinesFitSlurm(t *testing.T) {
	for _, sh := range shapes {
		tr, err := Build(generated(t, sh.stripes, sh.servers, sh.gpus, sh.nv))
		if err != nil {
			t.Fatal(err)
		}
		conf := SlurmTree(tr)
		switches := 0
		for _, l := range strings.Split(strings.TrimSpace(conf), "\n") {
			if len(l) > 1024 {
				t.Errorf("%s: line of %d characters: %.80s...", sh.name, len(l), l)
			}
			if strings.HasPrefix(l, "SwitchName=") {
				switches++
			}
		}
		want := 0
		for _, f := range tr.Fabrics {
			walk(f, func(*Node) { want++ })
		}
		if switches != want {
			t.Errorf("%s: %d switch lines, want %d", sh.name, switches, want)
		}
	}
}

// TestLeafGroupsOffRailOptimizedFabrics: without stripes, servers group by
// the exact set of leaves they are cabled to, named after the leaf (or the
// first leaf of a set).
func TestLeafGroupsOffRailOptimizedFabrics(t *testing.T) {
	top := generated(t, 1, 3, 2, 0)
	f := &top.Sites[0].Fabrics[0]
	f.RailOptimized = false
	for i := range f.Leaves {
		f.Leaves[i].Stripe, f.Leaves[i].Rail = nil, nil
	}
	// s1-gpu001 and s1-gpu002 on both leaves (dual-homed), s1-gpu003 on
	// the first leaf only.
	var cables []domain.Cable
	for _, c := range f.Cables {
		if c.Server == "s1-gpu003" {
			c.Leaf = f.Leaves[0].Name
		}
		cables = append(cables, c)
	}
	f.Cables = cables
	tr, err := Build(top)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range tr.Fabrics[0].Children {
		got = append(got, g.Short+"="+strings.Join(g.Servers, ","))
	}
	if want := "s1-leaf0-group=s1-gpu001,s1-gpu002 s1-leaf0=s1-gpu003"; strings.Join(got, " ") != want {
		t.Fatalf("leaf groups %v, want %s", got, want)
	}
}
