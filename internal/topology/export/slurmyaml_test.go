package export

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// slurmTopology is one entry of topology.yaml(5) (Slurm 24.11+), the
// fields jobfabric writes.
type slurmTopology struct {
	Topology       string `json:"topology"`
	ClusterDefault bool   `json:"cluster_default"`
	Block          *struct {
		BlockSizes []int `json:"block_sizes"`
		Blocks     []struct {
			Block string `json:"block"`
			Nodes string `json:"nodes"`
		} `json:"blocks"`
	} `json:"block,omitempty"`
	Tree *struct {
		Switches []struct {
			Switch   string `json:"switch"`
			Children string `json:"children,omitempty"`
			Nodes    string `json:"nodes,omitempty"`
		} `json:"switches"`
	} `json:"tree,omitempty"`
}

// TestSlurmYAMLShape decodes topology.yaml strictly on every shape: each
// entry starts with its topology name (topology.yaml(5): it must come
// first), exactly one is the cluster default, every server is in exactly
// one block of at least the base size, and the tree has a switch per tree
// node, as topology.conf does.
func TestSlurmYAMLShape(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			tr, err := Build(generated(t, sh.stripes, sh.servers, sh.gpus, sh.nv))
			if err != nil {
				t.Fatal(err)
			}
			out := SlurmYAML(tr)
			var tops []slurmTopology
			if err := yaml.UnmarshalStrict([]byte(out), &tops); err != nil {
				t.Fatalf("topology.yaml does not decode strictly: %v\n%s", err, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "- topology: ") {
					t.Errorf("an entry starts with %q, not its topology name", l)
				}
			}
			defaults := 0
			inBlock := map[string]int{}
			for _, tp := range tops {
				if tp.ClusterDefault {
					defaults++
				}
				if (tp.Block == nil) == (tp.Tree == nil) {
					t.Errorf("topology %s is not exactly one of block and tree", tp.Topology)
				}
				if tp.Block != nil {
					if len(tp.Block.BlockSizes) != 1 || tp.Block.BlockSizes[0] < 1 {
						t.Errorf("block sizes %v", tp.Block.BlockSizes)
					}
					for _, b := range tp.Block.Blocks {
						nodes := expand(t, b.Nodes)
						if len(nodes) < tp.Block.BlockSizes[0] {
							t.Errorf("block %s has %d nodes, below the base size %d", b.Block, len(nodes), tp.Block.BlockSizes[0])
						}
						for _, n := range nodes {
							inBlock[n]++
						}
					}
				}
				if tp.Tree != nil {
					want := 0
					for _, f := range tr.Fabrics {
						walk(f, func(*Node) { want++ })
					}
					if len(tp.Tree.Switches) != want {
						t.Errorf("tree has %d switches, want %d", len(tp.Tree.Switches), want)
					}
				}
			}
			if len(tops) != 2 || defaults != 1 {
				t.Errorf("%d topologies, %d cluster defaults; want 2 and 1", len(tops), defaults)
			}
			if len(inBlock) != len(tr.Servers) {
				t.Errorf("%d servers in blocks, want %d", len(inBlock), len(tr.Servers))
			}
			for n, k := range inBlock {
				if k != 1 {
					t.Errorf("server %s in %d blocks", n, k)
				}
			}
		})
	}
}

// expand reads the hostlists Hostlist writes (prefix[a-b,c],name).
func expand(t *testing.T, hl string) []string {
	t.Helper()
	var out []string
	for hl != "" {
		i := strings.IndexAny(hl, "[,")
		if i < 0 {
			out = append(out, hl)
			break
		}
		if hl[i] == ',' {
			out = append(out, hl[:i])
			hl = hl[i+1:]
			continue
		}
		prefix := hl[:i]
		end := strings.IndexByte(hl, ']')
		for _, r := range strings.Split(hl[i+1:end], ",") {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			var a, b int
			if _, err := fmtSscan(lo, &a); err != nil {
				t.Fatalf("hostlist %q: %v", hl, err)
			}
			if _, err := fmtSscan(hi, &b); err != nil {
				t.Fatalf("hostlist %q: %v", hl, err)
			}
			for n := a; n <= b; n++ {
				out = append(out, prefix+pad(n, len(lo)))
			}
		}
		hl = strings.TrimPrefix(hl[end+1:], ",")
	}
	return out
}

// fmtSscan reads a decimal with leading zeros (fmt.Sscan reads 018 as octal).
func fmtSscan(s string, n *int) (int, error) {
	v, err := strconv.Atoi(s)
	*n = v
	return 1, err
}

func pad(n, width int) string { return fmt.Sprintf("%0*d", width, n) }
