package export

// VolcanoAPIVersion is the API of Volcano's HyperNode (Volcano >= 1.12).
const VolcanoAPIVersion = "topology.volcano.sh/v1alpha1"

type hyperNode struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   objectMeta    `json:"metadata"`
	Spec       hyperNodeSpec `json:"spec"`
}

type hyperNodeSpec struct {
	// Tier only: tierName is newer than HyperNode itself, and a strict
	// apply to an older CRD would refuse it.
	Tier    int      `json:"tier"`
	Members []member `json:"members"`
}

type member struct {
	Type     string `json:"type"` // Node or HyperNode
	Selector struct {
		ExactMatch struct {
			Name string `json:"name"`
		} `json:"exactMatch"`
	} `json:"selector"`
}

func memberOf(kind, name string) member {
	var m member
	m.Type = kind
	m.Selector.ExactMatch.Name = name
	return m
}

// Tier is the Volcano tier of a level: 1 is the lowest, the HyperNodes
// whose members are Nodes.
func Tier(tr *Tree, l Level) int {
	t := map[Level]int{LevelLeafGroup: 1, LevelFabric: 2}
	if tr.NVLink {
		t = map[Level]int{LevelNVLink: 1, LevelLeafGroup: 2, LevelFabric: 3}
	}
	return t[l]
}

// Volcano writes one HyperNode per tree node, lowest tier first (a
// HyperNode's members exist before it), members by exact name.
func Volcano(tr *Tree) ([]byte, error) {
	var docs []any
	for tier := 1; tier <= Tier(tr, LevelFabric); tier++ {
		for _, root := range tr.Fabrics {
			walk(root, func(n *Node) {
				if Tier(tr, n.Level) != tier {
					return
				}
				h := hyperNode{APIVersion: VolcanoAPIVersion, Kind: "HyperNode", Metadata: objectMeta{Name: n.Name}}
				h.Spec.Tier = tier
				for _, c := range n.Children {
					h.Spec.Members = append(h.Spec.Members, memberOf("HyperNode", c.Name))
				}
				for _, s := range n.Servers {
					h.Spec.Members = append(h.Spec.Members, memberOf("Node", s))
				}
				docs = append(docs, h)
			})
		}
	}
	return yamlStream(docs)
}
