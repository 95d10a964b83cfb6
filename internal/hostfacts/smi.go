package hostfacts

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Query is what `nvidia-smi -q` says of a server (XML with -x, or the
// text form): driver, CUDA and one entry per GPU in index order.
type Query struct {
	Driver string
	CUDA   string
	GPUs   []QueryGPU
}

// QueryGPU is one GPU of a Query.
type QueryGPU struct {
	Index     int // position in the output: nvidia-smi's index
	PCIBusID  string
	Product   string
	UUID      string
	Minor     int // -1 when not reported
	MemoryMiB int
	// MIGMode is the current MIG mode: Enabled, Disabled, or "" when the
	// GPU has none (N/A).
	MIGMode string
	MIG     []QueryMIG
	// Fabric is the multi-node NVLink identity (cluster UUID/clique),
	// empty when the GPU is not part of one.
	Fabric string
}

// QueryMIG is a MIG device as -q lists it (no UUID, no profile name).
type QueryMIG struct {
	Index, GI, CI int
	MemoryMiB     int
	SMs           int
}

type xmlLog struct {
	Driver string   `xml:"driver_version"`
	CUDA   string   `xml:"cuda_version"`
	GPUs   []xmlGPU `xml:"gpu"`
}

type xmlGPU struct {
	ID      string `xml:"id,attr"`
	Product string `xml:"product_name"`
	UUID    string `xml:"uuid"`
	Minor   string `xml:"minor_number"`
	MIGMode string `xml:"mig_mode>current_mig"`
	MIG     []struct {
		Index string `xml:"index"`
		GI    string `xml:"gpu_instance_id"`
		CI    string `xml:"compute_instance_id"`
		SMs   string `xml:"device_attributes>shared>multiprocessor_count"`
		FB    string `xml:"fb_memory_usage>total"`
	} `xml:"mig_devices>mig_device"`
	BusID  string `xml:"pci>pci_bus_id"`
	FB     string `xml:"fb_memory_usage>total"`
	Fabric struct {
		ClusterUUID string `xml:"clusterUuid"`
		CliqueID    string `xml:"cliqueId"`
	} `xml:"fabric"`
}

// ParseQueryXML parses `nvidia-smi -q -x`.
func ParseQueryXML(b []byte) (*Query, error) {
	var l xmlLog
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	if err := dec.Decode(&l); err != nil {
		return nil, parseError("nvidia-smi -q -x", "xml", err.Error())
	}
	q := &Query{Driver: strings.TrimSpace(l.Driver), CUDA: strings.TrimSpace(l.CUDA)}
	for i, g := range l.GPUs {
		qg := QueryGPU{Index: i, PCIBusID: strings.TrimSpace(firstNonEmpty(g.BusID, g.ID)), Product: strings.TrimSpace(g.Product),
			UUID: strings.TrimSpace(g.UUID), Minor: atoiOr(g.Minor, -1), MIGMode: migMode(g.MIGMode),
			Fabric: fabricID(g.Fabric.ClusterUUID, g.Fabric.CliqueID)}
		var err error
		if qg.MemoryMiB, err = mib(g.FB); err != nil {
			return nil, parseError("nvidia-smi -q -x", fmt.Sprintf("gpu[%d].fb_memory_usage.total", i), err.Error())
		}
		for j, m := range g.MIG {
			mm := QueryMIG{Index: atoiOr(m.Index, j), GI: atoiOr(m.GI, -1), CI: atoiOr(m.CI, -1), SMs: atoiOr(m.SMs, 0)}
			mm.MemoryMiB, _ = mib(m.FB)
			qg.MIG = append(qg.MIG, mm)
		}
		if err := qg.check(); err != nil {
			return nil, parseError("nvidia-smi -q -x", fmt.Sprintf("gpu[%d]", i), err.Error())
		}
		q.GPUs = append(q.GPUs, qg)
	}
	if q.Driver == "" {
		return nil, parseError("nvidia-smi -q -x", "driver_version", "missing")
	}
	return q, nil
}

func (g *QueryGPU) check() error {
	if !strings.HasPrefix(g.UUID, "GPU-") {
		return fmt.Errorf("uuid %q does not start with GPU-", g.UUID)
	}
	if g.PCIBusID == "" {
		return fmt.Errorf("no PCI bus id")
	}
	return nil
}

// node is one line of the text form of nvidia-smi -q: "Key : Value" or a
// section "Key" whose children are indented deeper.
type node struct {
	key, value string
	kids       []*node
}

func (n *node) child(path ...string) *node {
	cur := n
	for _, k := range path {
		var next *node
		for _, c := range cur.kids {
			if c.key == k {
				next = c
				break
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

func (n *node) get(path ...string) string {
	if c := n.child(path...); c != nil {
		return c.value
	}
	return ""
}

// parseTree builds the indentation tree of the text form.
func parseTree(text string) *node {
	root := &node{}
	type frame struct {
		indent int
		n      *node
	}
	stack := []frame{{-1, root}}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " \r\t")
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "==") {
			continue
		}
		indent := len(line) - len(trimmed)
		n := &node{key: trimmed}
		if k, v, ok := strings.Cut(trimmed, " : "); ok {
			n.key, n.value = strings.TrimSpace(k), strings.TrimSpace(v)
		} else if k, ok := strings.CutSuffix(trimmed, " :"); ok {
			n.key = strings.TrimSpace(k)
		}
		for len(stack) > 1 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		parent := stack[len(stack)-1].n
		parent.kids = append(parent.kids, n)
		stack = append(stack, frame{indent, n})
	}
	return root
}

// ParseQueryText parses the text form of `nvidia-smi -q`. MIG devices are
// read from the XML form only; a MIG-enabled GPU in text output reports
// its mode and no devices.
func ParseQueryText(text string) (*Query, error) {
	root := parseTree(text)
	q := &Query{Driver: root.get("Driver Version"), CUDA: root.get("CUDA Version")}
	if q.Driver == "" {
		return nil, parseError("nvidia-smi -q", "Driver Version", "missing: not nvidia-smi -q output")
	}
	for _, c := range root.kids {
		bus, ok := strings.CutPrefix(c.key, "GPU ")
		if !ok || strings.Contains(bus, " ") {
			continue
		}
		g := QueryGPU{Index: len(q.GPUs), PCIBusID: firstNonEmpty(c.get("PCI", "Bus Id"), bus), Product: c.get("Product Name"),
			UUID: c.get("GPU UUID"), Minor: atoiOr(c.get("Minor Number"), -1), MIGMode: migMode(c.get("MIG Mode", "Current")),
			Fabric: fabricID(c.get("Fabric", "ClusterUUID"), c.get("Fabric", "CliqueId"))}
		var err error
		if g.MemoryMiB, err = mib(c.get("FB Memory Usage", "Total")); err != nil {
			return nil, parseError("nvidia-smi -q", "GPU "+bus+" FB Memory Usage.Total", err.Error())
		}
		if err := g.check(); err != nil {
			return nil, parseError("nvidia-smi -q", "GPU "+bus, err.Error())
		}
		q.GPUs = append(q.GPUs, g)
	}
	return q, nil
}

func migMode(s string) string {
	switch s = strings.TrimSpace(s); s {
	case "Enabled", "Disabled":
		return s
	}
	return ""
}

// fabricID is the multi-node NVLink identity, empty when absent or unset
// (N/A, an all-zero UUID).
func fabricID(cluster, clique string) string {
	cluster, clique = strings.TrimSpace(cluster), strings.TrimSpace(clique)
	if cluster == "" || cluster == "N/A" || strings.Trim(cluster, "0-") == "" {
		return ""
	}
	if clique == "" || clique == "N/A" {
		return cluster
	}
	return cluster + "/" + clique
}

// mib parses "81559 MiB".
func mib(s string) (int, error) {
	s = strings.TrimSpace(s)
	v, ok := strings.CutSuffix(s, " MiB")
	if !ok {
		return 0, fmt.Errorf("memory %q is not N MiB", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("memory %q is not N MiB", s)
	}
	return n, nil
}

// atoiOr parses a whole number (natoi), def when there is none: every
// number nvidia-smi reports this way is an index, an ID or a count.
func atoiOr(s string, def int) int {
	n, ok := natoi(strings.TrimSpace(s))
	if !ok {
		return def
	}
	return n
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if strings.TrimSpace(x) != "" {
			return strings.TrimSpace(x)
		}
	}
	return ""
}

// parseError names the source, the element and what was wrong.
func parseError(source, field, msg string) *domain.Error {
	return &domain.Error{Code: domain.CodeInvalidArgument, Field: field, Message: fmt.Sprintf("%s: %s: %s", source, field, msg),
		Details: []domain.Detail{{Field: field, Rule: "format", Message: source}}}
}
