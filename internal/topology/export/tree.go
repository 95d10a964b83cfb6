package export

import (
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Level names the tiers of the tree, top to bottom.
type Level string

// The levels of the tree.
const (
	LevelFabric    Level = "fabric"
	LevelLeafGroup Level = "leaf-group"
	LevelNVLink    Level = "nvlink"
)

// Node is one switch tier of the tree: a fabric (its spines), a leaf group
// or a multi-server NVLink domain.
type Node struct {
	Level Level
	// Short is the node's name within its parent (a label value: stripe1,
	// dc1, nvl-rack7); Name is unique in the whole cluster (a Kubernetes
	// object and Slurm switch name: dc1-fabric1-stripe1).
	Short, Name string
	// Switches are the inventory's switches the node stands for (spines of
	// a fabric, leaves of a leaf group); none for an NVLink domain.
	Switches []string
	Children []*Node
	// Servers are the servers directly under the node, sorted.
	Servers []string
}

// Server is what one server's labels come from.
type Server struct {
	Name, Site, Fabric string
	Stripe             int
	// LeafGroup and NVLink are the Short names of its tree nodes; NVLink is
	// empty when the tree has no NVLink level.
	LeafGroup, NVLink string
	// RailLeaves maps a rail to the leaf the server's NIC on it is cabled to.
	RailLeaves map[int]string
}

// Tree is the hierarchy of a topology.
type Tree struct {
	// Fabrics are the roots, in the topology's order.
	Fabrics []*Node
	// Servers in the topology's order.
	Servers []Server
	// NVLink says whether any fabric has a multi-server NVLink domain, and
	// so the tree an NVLink level (over every server).
	NVLink bool
}

// Build returns the tree of t. t must be valid (topology.Validate).
func Build(t *domain.Topology) (*Tree, error) {
	tr := &Tree{}
	// One multi-server NVLink domain anywhere gives every server an NVLink
	// node (its own when it is alone), so each level holds one kind of
	// member everywhere (Volcano's tiers and Kueue's levels expect that).
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			n := map[string]int{}
			for _, s := range f.Servers {
				if n[nvlinkDomain(s)]++; n[nvlinkDomain(s)] > 1 {
					tr.NVLink = true
				}
			}
		}
	}
	seen := map[string]string{} // unique name -> what took it
	claim := func(name, what string) error {
		if prev, ok := seen[name]; ok {
			return domain.Invalid("topology", "%s and %s both export as %q: rename one (names are lower-cased, other characters than a-z, 0-9, '-' and '.' become '-')", prev, what, name)
		}
		seen[name] = what
		return nil
	}
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			root := &Node{Level: LevelFabric, Short: dnsLabel(f.Name), Name: dnsName(site.Name + "-" + f.Name)}
			for _, sp := range slices.Concat(f.SuperSpines, f.Spines) {
				root.Switches = append(root.Switches, sp.Name)
			}
			if err := claim(root.Name, "fabric "+site.Name+"/"+f.Name); err != nil {
				return nil, err
			}
			leafOf := map[string]domain.Switch{}
			for _, l := range f.Leaves {
				leafOf[l.Name] = l
			}
			// The leaves each server is cabled to, and its rail leaves.
			leaves := map[string][]string{}
			rails := map[string]map[int]string{}
			nicRail := map[string]map[string]int{}
			for _, s := range f.Servers {
				nicRail[s.Name] = map[string]int{}
				for _, n := range s.NICs {
					nicRail[s.Name][n.Name] = n.Rail
				}
			}
			for _, c := range f.Cables {
				if !slices.Contains(leaves[c.Server], c.Leaf) {
					leaves[c.Server] = append(leaves[c.Server], c.Leaf)
				}
				if rails[c.Server] == nil {
					rails[c.Server] = map[int]string{}
				}
				rails[c.Server][nicRail[c.Server][c.NIC]] = c.Leaf
			}
			groups := map[string]*Node{}
			var order []string
			for _, s := range f.Servers {
				ls := slices.Sorted(slices.Values(leaves[s.Name]))
				key := strings.Join(ls, ",")
				g, ok := groups[key]
				if !ok {
					short := groupName(ls, leafOf)
					g = &Node{Level: LevelLeafGroup, Short: short, Name: dnsName(root.Name + "-" + short), Switches: ls}
					if err := claim(g.Name, "leaf group "+key+" of fabric "+site.Name+"/"+f.Name); err != nil {
						return nil, err
					}
					groups[key] = g
					order = append(order, key)
					root.Children = append(root.Children, g)
				}
				sv := Server{Name: s.Name, Site: site.Name, Fabric: f.Name, Stripe: s.Stripe, LeafGroup: g.Short, RailLeaves: rails[s.Name]}
				if d := nvlinkDomain(s); tr.NVLink {
					sv.NVLink = dnsLabel(d)
					var nv *Node
					for _, c := range g.Children {
						if c.Short == sv.NVLink {
							nv = c
						}
					}
					if nv == nil {
						nv = &Node{Level: LevelNVLink, Short: sv.NVLink, Name: dnsName(g.Name + "-nvl-" + d)}
						if err := claim(nv.Name, "NVLink domain "+d); err != nil {
							return nil, err
						}
						g.Children = append(g.Children, nv)
					}
					nv.Servers = append(nv.Servers, s.Name)
				} else {
					g.Servers = append(g.Servers, s.Name)
				}
				tr.Servers = append(tr.Servers, sv)
			}
			tr.Fabrics = append(tr.Fabrics, root)
		}
	}
	return tr, nil
}

func nvlinkDomain(s domain.Server) string {
	if s.NVLinkDomain != "" {
		return s.NVLinkDomain
	}
	return s.Name
}

// groupName names a leaf group: stripeN when its leaves are the rail
// leaves of one stripe, the leaf's name when it is one leaf, else the
// first leaf's name with a "-group" suffix.
func groupName(leaves []string, leafOf map[string]domain.Switch) string {
	if len(leaves) == 0 {
		return "uncabled"
	}
	stripe := -1
	for _, l := range leaves {
		sw := leafOf[l]
		if sw.Stripe == nil || (stripe >= 0 && *sw.Stripe != stripe) {
			stripe = -1
			break
		}
		stripe = *sw.Stripe
	}
	switch {
	case stripe >= 0:
		return "stripe" + strconv.Itoa(stripe)
	case len(leaves) == 1:
		return dnsLabel(leaves[0])
	}
	return dnsLabel(leaves[0] + "-group")
}

// dnsName makes s a DNS-1123 subdomain (a Kubernetes object name): lower
// case, runs of other characters than [a-z0-9.-] as one '-', trimmed to
// an alphanumeric at both ends.
func dnsName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if len(out) > 253 {
		out = strings.TrimRight(out[:253], "-.")
	}
	return out
}

// dnsLabel is dnsName cut to a label value's 63 characters.
func dnsLabel(s string) string {
	out := dnsName(s)
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-.")
	}
	return out
}

// walk calls f on every node, parents first.
func walk(n *Node, f func(*Node)) {
	f(n)
	for _, c := range n.Children {
		walk(c, f)
	}
}
