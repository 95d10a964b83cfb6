package export

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
)

// TestSlurmctldAcceptsTopologyConf runs Debian's slurmctld (22.05) with
// TopologyPlugin=topology/tree on the exported topology.conf: it must start,
// show every exported switch with its nodes, and keep a job of one stripe's
// size inside one stripe and a 2-node job inside one NVLink domain. Nodes
// are State=CLOUD with a no-op ResumeProgram, so no slurmd runs (see
// shared/reference/slurm-facts.md).
func TestSlurmctldAcceptsTopologyConf(t *testing.T) {
	// 2 stripes x 4 servers, NVLink domains of 2 servers: three levels.
	tr, err := Build(generated(t, 2, 4, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	conf := SlurmTree(tr)
	var nodes []string
	for _, s := range tr.Servers {
		nodes = append(nodes, s.Name)
	}
	sc := slurmtest.Start(t, slurmtest.Options{Nodes: Hostlist(nodes), TopologyConf: conf})
	run := sc.Run
	slurmLog := func() string { return sc.Log() + "\ntopology.conf:\n" + conf }
	poll := func(what string, ok func() (bool, string)) { t.Helper(); sc.Poll(t, what, ok) }

	out, err := run("scontrol", "show", "topology")
	if err != nil {
		t.Fatalf("scontrol show topology: %v\n%s", err, out)
	}
	for _, root := range tr.Fabrics {
		walk(root, func(n *Node) {
			if !strings.Contains(out, "SwitchName="+n.Name+" ") {
				t.Errorf("slurmctld does not show switch %s:\n%s", n.Name, out)
			}
		})
	}
	level := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := slurmtest.Fields(line)
		level[f["SwitchName"]] = f["Level"]
	}
	for _, root := range tr.Fabrics {
		if level[root.Name] != "2" {
			t.Errorf("fabric switch %s at level %q, want 2 (above leaf groups and NVLink domains):\n%s", root.Name, level[root.Name], out)
		}
	}

	// A stripe-sized job stays in a stripe; a 2-node job in one NVLink domain.
	submit := func(n int) string {
		out, err := run("sbatch", "--parsable", "-N", fmt.Sprint(n), "--exclusive", "--wrap", "true")
		if err != nil {
			t.Fatalf("sbatch -N %d: %v\n%s\n%s", n, err, out, slurmLog())
		}
		return strings.TrimSpace(out)
	}
	wide, pair := submit(4), submit(2)
	alloc := map[string]string{}
	poll("jobs were not allocated", func() (bool, string) {
		out, _ := run("squeue", "-h", "-o", "%i %N")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if id, nl, ok := strings.Cut(l, " "); ok && nl != "" {
				alloc[id] = nl
			}
		}
		return alloc[wide] != "" && alloc[pair] != "", out
	})
	expand := func(hl string) []string {
		out, err := run("scontrol", "show", "hostnames", hl)
		if err != nil {
			t.Fatalf("scontrol show hostnames %s: %v", hl, err)
		}
		return strings.Fields(out)
	}
	under := func(nodes []string, level Level) map[string]bool {
		got := map[string]bool{}
		for _, n := range nodes {
			for _, s := range tr.Servers {
				if s.Name == n {
					got[map[Level]string{LevelLeafGroup: s.LeafGroup, LevelNVLink: s.NVLink}[level]] = true
				}
			}
		}
		return got
	}
	if g := under(expand(alloc[wide]), LevelLeafGroup); len(g) != 1 {
		t.Errorf("4-node job %s on %s spans leaf groups %v, want one stripe", wide, alloc[wide], g)
	}
	if g := under(expand(alloc[pair]), LevelNVLink); len(g) != 1 {
		t.Errorf("2-node job %s on %s spans NVLink domains %v, want one", pair, alloc[pair], g)
	}
}

// TestSlurmctldAcceptsTopologyYAML starts slurmctld with the exported
// topology.yaml (NVLink domains of 2 servers as blocks, the default): it
// must start and show every block. topology/block and topology.yaml came
// with Slurm 23.02 and 24.11: the test skips on Debian 12's 22.05, which
// has neither.
func TestSlurmctldAcceptsTopologyYAML(t *testing.T) {
	tr, err := Build(generated(t, 2, 4, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	y := SlurmYAML(tr)
	var nodes []string
	for _, s := range tr.Servers {
		nodes = append(nodes, s.Name)
	}
	sc := slurmtest.Start(t, slurmtest.Options{Nodes: Hostlist(nodes), TopologyYAML: y, Plugins: []string{"topology_block"}})
	out, err := sc.Run("scontrol", "show", "topology")
	if err != nil {
		t.Fatalf("scontrol show topology: %v\n%s", err, out)
	}
	for _, root := range tr.Fabrics {
		walk(root, func(n *Node) {
			if n.Level == LevelNVLink && !strings.Contains(out, n.Name) {
				t.Errorf("slurmctld does not show block %s:\n%s\ntopology.yaml:\n%s", n.Name, out, y)
			}
		})
	}
}
