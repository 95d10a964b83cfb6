package export

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SlurmTree writes topology.conf for Slurm's topology/tree plugin: one
// switch per tree node (a fabric's spines, a leaf group, an NVLink domain),
// children before parents, node and switch lists in Slurm's hostlist
// syntax (gpu[001-032]) so long stripes stay within a line's limit.
func SlurmTree(tr *Tree) string {
	var b strings.Builder
	b.WriteString("# topology.conf for TopologyPlugin=topology/tree, written by jobfabric topology export.\n")
	b.WriteString("# Switches: each fabric (its spines), each leaf group (on rail-optimized fabrics, a stripe's rail leaves)")
	if tr.NVLink {
		b.WriteString(", each NVLink domain")
	}
	b.WriteString(".\n")
	for _, root := range tr.Fabrics {
		// Children before parents, each level in the inventory's order.
		for _, l := range []Level{LevelNVLink, LevelLeafGroup, LevelFabric} {
			walk(root, func(n *Node) {
				if n.Level != l {
					return
				}
				b.WriteString("SwitchName=" + n.Name)
				var kids []string
				for _, c := range n.Children {
					kids = append(kids, c.Name)
				}
				if len(kids) > 0 {
					b.WriteString(" Switches=" + Hostlist(kids))
				}
				if len(n.Servers) > 0 {
					b.WriteString(" Nodes=" + Hostlist(n.Servers))
				}
				b.WriteByte('\n')
			})
		}
	}
	return b.String()
}

// Hostlist compresses names into Slurm's hostlist expression: names that
// differ only in a trailing number of the same width become
// prefix[a-b,c]; others stay as they are, comma-separated, in order of
// first appearance of their prefix.
func Hostlist(names []string) string {
	type run struct {
		prefix string
		width  int
		nums   []int
	}
	var runs []*run
	byKey := map[string]*run{}
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		if i == len(n) || strings.ContainsAny(n[:i], "[],") {
			runs = append(runs, &run{prefix: n, width: -1})
			continue
		}
		num, err := strconv.Atoi(n[i:])
		if err != nil {
			runs = append(runs, &run{prefix: n, width: -1})
			continue
		}
		key := n[:i] + "/" + strconv.Itoa(len(n)-i)
		r, ok := byKey[key]
		if !ok {
			r = &run{prefix: n[:i], width: len(n) - i}
			byKey[key] = r
			runs = append(runs, r)
		}
		r.nums = append(r.nums, num)
	}
	var out []string
	for _, r := range runs {
		switch {
		case r.width < 0:
			out = append(out, r.prefix)
		case len(r.nums) == 1:
			out = append(out, fmt.Sprintf("%s%0*d", r.prefix, r.width, r.nums[0]))
		default:
			nums := slices.Compact(slices.Sorted(slices.Values(r.nums)))
			var parts []string
			for i := 0; i < len(nums); {
				j := i
				for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
					j++
				}
				if j == i {
					parts = append(parts, fmt.Sprintf("%0*d", r.width, nums[i]))
				} else {
					parts = append(parts, fmt.Sprintf("%0*d-%0*d", r.width, nums[i], r.width, nums[j]))
				}
				i = j + 1
			}
			out = append(out, r.prefix+"["+strings.Join(parts, ",")+"]")
		}
	}
	return strings.Join(out, ",")
}

// SlurmYAML writes topology.yaml for Slurm 24.11 and later (it replaces
// topology.conf when both exist): a block topology, "block", whose blocks
// are the multi-server NVLink domains (the leaf groups when the inventory
// has none), the smallest block's node count its base block size; and the
// tree topology of SlurmTree, "tree". The block topology is the
// cluster default when there are NVLink domains (a job inside one domain
// talks over NVLink), else the tree; a partition picks the other with
// Topology=.
func SlurmYAML(tr *Tree) string {
	var b strings.Builder
	b.WriteString("# topology.yaml for Slurm 24.11+ (topology/block and topology/tree), written by jobfabric topology export.\n")
	blockLevel := LevelLeafGroup
	if tr.NVLink {
		blockLevel = LevelNVLink
		b.WriteString("# Blocks: each NVLink domain.\n")
	} else {
		b.WriteString("# Blocks: each leaf group (the inventory has no multi-server NVLink domain).\n")
	}
	var blocks []*Node
	for _, root := range tr.Fabrics {
		walk(root, func(n *Node) {
			if n.Level == blockLevel {
				blocks = append(blocks, n)
			}
		})
	}
	base := 0
	for _, n := range blocks {
		if base == 0 || len(n.Servers) < base {
			base = len(n.Servers)
		}
	}
	fmt.Fprintf(&b, "- topology: block\n  cluster_default: %t\n  block:\n    block_sizes:\n      - %d\n    blocks:\n", tr.NVLink, base)
	for _, n := range blocks {
		fmt.Fprintf(&b, "      - block: %s\n        nodes: %s\n", n.Name, Hostlist(n.Servers))
	}
	fmt.Fprintf(&b, "- topology: tree\n  cluster_default: %t\n  tree:\n    switches:\n", !tr.NVLink)
	for _, root := range tr.Fabrics {
		for _, l := range []Level{LevelNVLink, LevelLeafGroup, LevelFabric} {
			walk(root, func(n *Node) {
				if n.Level != l {
					return
				}
				fmt.Fprintf(&b, "      - switch: %s\n", n.Name)
				var kids []string
				for _, c := range n.Children {
					kids = append(kids, c.Name)
				}
				if len(kids) > 0 {
					fmt.Fprintf(&b, "        children: %s\n", Hostlist(kids))
				}
				if len(n.Servers) > 0 {
					fmt.Fprintf(&b, "        nodes: %s\n", Hostlist(n.Servers))
				}
			})
		}
	}
	return b.String()
}
