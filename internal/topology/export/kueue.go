package export

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"sigs.k8s.io/yaml"
)

// Node labels: the levels of Kueue's topology-aware scheduling, top to
// bottom, then labels that are informational only.
const (
	LabelSite      = "jobfabric.io/site"
	LabelFabric    = "jobfabric.io/fabric"
	LabelLeafGroup = "jobfabric.io/leaf-group"
	// LabelNVLink is the label NVIDIA's GPU feature discovery sets on
	// multi-node NVLink systems; the export sets it to the inventory's
	// NVLink domain.
	LabelNVLink   = "nvidia.com/gpu.clique"
	LabelHostname = "kubernetes.io/hostname"
	LabelStripe   = "jobfabric.io/stripe"
	// LabelRailLeafFormat names the leaf of rail N (jobfabric.io/rail-0-leaf).
	LabelRailLeafFormat = "jobfabric.io/rail-%d-leaf"
)

// KueueAPIVersion is the Kueue API the Topology is written in: v1beta2,
// the storage version of Kueue v0.17 (whose Go types the tests decode it
// into).
const KueueAPIVersion = "kueue.x-k8s.io/v1beta2"

type objectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type kueueTopology struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Levels []kueueLevel `json:"levels"`
	} `json:"spec"`
}

type kueueLevel struct {
	NodeLabel string `json:"nodeLabel"`
}

type nodePatch struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
}

// KueueLevels are the Topology's levels for tr, top to bottom. The last is
// kubernetes.io/hostname, which Kueue requires to be the lowest level and
// which the kubelet sets: the export leaves it alone.
func KueueLevels(tr *Tree) []string {
	l := []string{LabelSite, LabelFabric, LabelLeafGroup}
	if tr.NVLink {
		l = append(l, LabelNVLink)
	}
	return append(l, LabelHostname)
}

// NodeLabels are the labels the export sets on a server's Node.
func NodeLabels(tr *Tree, s Server) map[string]string {
	m := map[string]string{
		LabelSite:      dnsLabel(s.Site),
		LabelFabric:    dnsLabel(s.Fabric),
		LabelLeafGroup: s.LeafGroup,
		LabelStripe:    strconv.Itoa(s.Stripe),
	}
	if tr.NVLink {
		m[LabelNVLink] = s.NVLink
	}
	for r, leaf := range s.RailLeaves {
		m[fmt.Sprintf(LabelRailLeafFormat, r)] = dnsLabel(leaf)
	}
	return m
}

// Kueue writes a Kueue Topology named name, then one Node per server that
// carries only its name and the export's labels: a YAML stream for
// `kubectl apply --server-side --field-manager=jobfabric-topology` (which
// merges the labels into existing Nodes; it would create a missing one, so
// apply it to the Nodes that exist, or use the node-labels script).
func Kueue(tr *Tree, name string) ([]byte, error) {
	var k kueueTopology
	k.APIVersion, k.Kind, k.Metadata.Name = KueueAPIVersion, "Topology", dnsName(name)
	for _, l := range KueueLevels(tr) {
		k.Spec.Levels = append(k.Spec.Levels, kueueLevel{NodeLabel: l})
	}
	docs := []any{k}
	for _, s := range tr.Servers {
		docs = append(docs, nodePatch{APIVersion: "v1", Kind: "Node", Metadata: objectMeta{Name: s.Name, Labels: NodeLabels(tr, s)}})
	}
	return yamlStream(docs)
}

// LabelScript writes the same labels as `kubectl label` commands, one per
// server: a command fails on a Node that does not exist, and never
// creates one.
func LabelScript(tr *Tree) string {
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n# Node labels of the jobfabric topology export (Kueue TAS levels and rail leaves).\nset -e\n")
	for _, s := range tr.Servers {
		m := NodeLabels(tr, s)
		fmt.Fprintf(&b, "kubectl label node --overwrite %s", s.Name)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&b, " %s=%s", k, m[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func yamlStream(docs []any) ([]byte, error) {
	var b bytes.Buffer
	for i, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
