package binding

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Shell renders the environment as `export NAME=value` lines for a shell
// (eval "$(jobfabric job env 42 --node gpu-a1)"); values are quoted when
// they need it.
func (b *Binding) Shell() string {
	var sb strings.Builder
	for _, e := range b.Env {
		fmt.Fprintf(&sb, "export %s=%s\n", e.Name, shellQuote(e.Value))
	}
	return sb.String()
}

// TaskProlog renders the environment for a Slurm TaskProlog: slurmstepd
// reads `export NAME=value` lines from its standard output and sets each
// value as written, without a shell, so a value that would need quoting is
// refused rather than passed on mangled.
func (b *Binding) TaskProlog() (string, error) {
	var sb strings.Builder
	for _, e := range b.Env {
		if !plain(e.Value) {
			return "", &domain.Error{Code: domain.CodeFailedPrecondition, Field: e.Name,
				Message: fmt.Sprintf("%s=%q holds characters a TaskProlog line cannot carry", e.Name, e.Value)}
		}
		fmt.Fprintf(&sb, "export %s=%s\n", e.Name, e.Value)
	}
	return sb.String(), nil
}

// plain: letters, digits and , . : = / _ - + @ (every value the binder
// makes is; device and interface names are checked on report).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(",.:=/_-+@", c) >= 0) {
			return false
		}
	}
	return true
}

func shellQuote(s string) string {
	if plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CDI is a Container Device Interface spec (cdiVersion 0.6.0) with one
// device: the job. A runtime with CDI enabled gives a container the job's
// GPUs, MIG capabilities and RDMA devices and its environment with
// --device jobfabric.io/job=job-42.
type CDI struct {
	CDIVersion  string            `json:"cdiVersion"`
	Kind        string            `json:"kind"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Devices     []CDIDevice       `json:"devices"`
}

// CDIDevice is one named device of a CDI spec.
type CDIDevice struct {
	Name           string            `json:"name"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	ContainerEdits CDIEdits          `json:"containerEdits"`
}

// CDIEdits are the edits a runtime makes to the container.
type CDIEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []CDIDeviceNode `json:"deviceNodes,omitempty"`
}

// CDIDeviceNode is a device file; the runtime reads its type and numbers
// from the host path.
type CDIDeviceNode struct {
	Path string `json:"path"`
}

// CDIKind is the kind of jobfabric's CDI specs.
const CDIKind = "jobfabric.io/job"

// CDIDeviceName is the device name of a job in its spec ("job-42"); the
// fully qualified name is CDIKind + "=" + it.
func CDIDeviceName(job uint64) string { return "job-" + strconv.FormatUint(job, 10) }

// CDISpec returns the binding as a CDI spec.
func (b *Binding) CDISpec() *CDI {
	d := CDIDevice{Name: CDIDeviceName(b.Job), ContainerEdits: CDIEdits{}}
	for _, e := range b.Env {
		d.ContainerEdits.Env = append(d.ContainerEdits.Env, e.Name+"="+e.Value)
	}
	for _, p := range b.DeviceNodes {
		d.ContainerEdits.DeviceNodes = append(d.ContainerEdits.DeviceNodes, CDIDeviceNode{Path: p})
	}
	ann := map[string]string{"jobfabric.io/job": strconv.FormatUint(b.Job, 10), "jobfabric.io/node": b.Node, "jobfabric.io/tenant": b.Fabric.Tenant}
	if b.Fabric.VRF != "" {
		ann["jobfabric.io/vrf"] = b.Fabric.VRF
	}
	return &CDI{CDIVersion: "0.6.0", Kind: CDIKind, Annotations: ann, Devices: []CDIDevice{d}}
}

// CDIJSON is the spec as indented JSON (the file a runtime reads from
// /etc/cdi or /var/run/cdi).
func (b *Binding) CDIJSON() ([]byte, error) {
	out, err := json.MarshalIndent(b.CDISpec(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode CDI spec: %w", err)
	}
	return append(out, '\n'), nil
}

// cpuSet is a set of CPU numbers parsed from lists such as "0-47,96-143".
type cpuSet map[int]bool

// add parses a list into the set; false when it is not a CPU list.
func (s cpuSet) add(list string) bool {
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return false
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil || z < a || z-a > 1<<16 {
				return false
			}
		}
		for c := a; c <= z; c++ {
			s[c] = true
		}
	}
	return true
}

// String renders the set as ranges: 0-47,96-143.
func (s cpuSet) String() string {
	var cs []int
	for c := range s {
		cs = append(cs, c)
	}
	sort.Ints(cs)
	var parts []string
	for i := 0; i < len(cs); {
		j := i
		for j+1 < len(cs) && cs[j+1] == cs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cs[i], cs[j]))
		} else {
			parts = append(parts, strconv.Itoa(cs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
