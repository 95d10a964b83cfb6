package hostfacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Runner runs a command and returns its standard output. The agent's
// runner executes programs; FileRunner answers from recorded outputs.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Commands the collector runs, and the file FileRunner answers each with.
var commandFiles = map[string]string{
	"nvidia-smi -q -x":           "nvidia-smi-q-x.xml",
	"nvidia-smi -q":              "nvidia-smi-q.txt",
	"nvidia-smi -L":              "nvidia-smi-L.txt",
	"nvidia-smi topo -m":         "nvidia-smi-topo-m.txt",
	"nvidia-smi nvlink --status": "nvidia-smi-nvlink-status.txt",
	"nvidia-smi mig -lgi":        "nvidia-smi-mig-lgi.txt",
	"ibstat":                     "ibstat.txt",
}

// FixtureFiles lists the file names a fixture directory may hold, by
// command, for help texts and docs.
func FixtureFiles() map[string]string {
	out := make(map[string]string, len(commandFiles))
	for k, v := range commandFiles {
		out[k] = v
	}
	return out
}

// FileRunner answers commands from recorded outputs in FS (--fixture DIR):
// nvidia-smi -q -x from nvidia-smi-q-x.xml, and so on (FixtureFiles). A
// command without a file fails as if the program were missing.
type FileRunner struct{ FS fs.FS }

// Run implements Runner.
func (r FileRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{name}, args...), " ")
	f, ok := commandFiles[cmd]
	if !ok {
		return nil, fmt.Errorf("fixture: no recorded output for %q", cmd)
	}
	b, err := fs.ReadFile(r.FS, f)
	if err != nil {
		return nil, fmt.Errorf("fixture: %s: %w", cmd, err)
	}
	return b, nil
}

// Collector discovers a server's GPUs and NICs. Run answers nvidia-smi
// and ibstat; FS is the host's file system rooted at / (sysfs under
// sys/, procfs under proc/). Both are injected: the agent passes the real
// ones, tests and demos recorded outputs.
type Collector struct {
	Run      Runner
	FS       fs.FS
	Hostname string
}

// Collect runs one discovery. A missing optional source (topology, NVLink,
// MIG, RDMA) is recorded in Problems, not fatal; no GPU query at all is an
// error, since without it there is nothing to report.
func (c *Collector) Collect(ctx context.Context) (*domain.HostFacts, error) {
	f := &domain.HostFacts{Hostname: c.Hostname, GPUs: []domain.HostGPU{}, NICs: []domain.HostNIC{}}
	problem := func(format string, args ...any) { f.Problems = append(f.Problems, fmt.Sprintf(format, args...)) }

	q, err := c.query(ctx, f)
	if err != nil {
		return nil, err
	}
	f.Driver, f.CUDA = q.Driver, q.CUDA
	for _, g := range q.GPUs {
		hg := domain.HostGPU{Index: g.Index, UUID: g.UUID, Product: g.Product, Model: ModelOf(g.Product, g.MemoryMiB), MemoryMiB: g.MemoryMiB,
			PCIBusID: g.PCIBusID, Minor: g.Minor, NUMA: -1, MIGMode: g.MIGMode}
		if c.FS != nil {
			hg.NUMA = ReadNUMA(c.FS, g.PCIBusID)
		}
		for _, m := range g.MIG {
			hg.MIG = append(hg.MIG, domain.HostMIGDevice{Index: m.Index, GI: m.GI, CI: m.CI, MemoryMiB: m.MemoryMiB, SMs: m.SMs, Start: -1})
		}
		if g.Fabric != "" {
			f.NVLinkCluster = g.Fabric
		}
		f.GPUs = append(f.GPUs, hg)
	}
	if anyMIG(f) {
		c.migDetails(ctx, f, problem)
	}

	var topo *Topo
	if out, err := c.Run.Run(ctx, "nvidia-smi", "topo", "-m"); err != nil {
		problem("nvidia-smi topo -m: %v (no GPU/NIC affinity, NVLink groups or CPU affinity)", err)
	} else if topo, err = ParseTopo(string(out)); err != nil {
		problem("%v", err)
		topo = nil
	} else {
		f.Sources = append(f.Sources, "nvidia-smi topo -m")
		if topo.GPUs != len(f.GPUs) {
			problem("nvidia-smi topo -m shows %d GPUs, nvidia-smi -q %d", topo.GPUs, len(f.GPUs))
		}
		for i := range f.GPUs {
			if i < topo.GPUs {
				f.GPUs[i].CPUs = topo.CPUAffinity[i]
				if f.GPUs[i].NUMA < 0 {
					f.GPUs[i].NUMA = topo.NUMAAffinity[i]
				}
			}
		}
		if topo.GPUs == len(f.GPUs) {
			f.NVLinkGroups = topo.NVLinkGroups()
		}
	}

	if out, err := c.Run.Run(ctx, "nvidia-smi", "nvlink", "--status"); err == nil {
		if st, err := ParseNVLinkStatus(string(out)); err != nil {
			problem("%v", err)
		} else {
			f.Sources = append(f.Sources, "nvidia-smi nvlink --status")
			for _, s := range st {
				for i := range f.GPUs {
					if f.GPUs[i].UUID == s.UUID || (s.UUID == "" && f.GPUs[i].Index == s.Index) {
						f.GPUs[i].NVLinks, f.GPUs[i].NVLinksDown = s.Up, s.Down
					}
				}
			}
		}
	}

	ports := c.rdma(ctx, f, problem)
	for _, p := range ports {
		n := domain.HostNIC{RDMADevice: p.Device, Port: p.Port, Netdev: p.Netdev, LinkLayer: p.LinkLayer, State: p.State, RateGbps: p.RateGbps,
			HCAType: p.HCAType, Firmware: p.Firmware, PCIBusID: p.PCIBusID, NUMA: p.NUMA, GPU: -1, RoCEGID: p.RoCEGID, Uverbs: p.Uverbs}
		if topo != nil {
			if col := indexOf(topo.NICs, p.Device); col >= 0 {
				n.GPU, n.Path = topo.ClosestGPU(col)
				if n.NUMA < 0 {
					n.NUMA = topo.NICNUMA(col)
				}
			}
		}
		f.NICs = append(f.NICs, n)
	}
	sort.Slice(f.NICs, func(a, b int) bool {
		if f.NICs[a].RDMADevice != f.NICs[b].RDMADevice {
			return naturalLess(f.NICs[a].RDMADevice, f.NICs[b].RDMADevice)
		}
		return f.NICs[a].Port < f.NICs[b].Port
	})
	if err := domain.ValidateHostFacts(f); err != nil {
		return nil, fmt.Errorf("discovered facts are not valid: %w", err)
	}
	return f, nil
}

// query runs nvidia-smi -q -x, or the text form when XML is unavailable.
func (c *Collector) query(ctx context.Context, f *domain.HostFacts) (*Query, error) {
	out, xerr := c.Run.Run(ctx, "nvidia-smi", "-q", "-x")
	if xerr == nil {
		q, err := ParseQueryXML(out)
		if err != nil {
			return nil, err
		}
		f.Sources = append(f.Sources, "nvidia-smi -q -x")
		return q, nil
	}
	out, terr := c.Run.Run(ctx, "nvidia-smi", "-q")
	if terr != nil {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "nvidia-smi",
			Message: fmt.Sprintf("cannot query the GPUs: nvidia-smi -q -x: %v; nvidia-smi -q: %v", xerr, terr)}
	}
	q, err := ParseQueryText(string(out))
	if err != nil {
		return nil, err
	}
	f.Sources = append(f.Sources, "nvidia-smi -q")
	return q, nil
}

// migDetails adds what -q does not say of MIG devices: UUIDs and profiles
// (nvidia-smi -L), placements (nvidia-smi mig -lgi) and the capability
// minors a container needs (/proc/driver/nvidia-caps/mig-minors).
func (c *Collector) migDetails(ctx context.Context, f *domain.HostFacts, problem func(string, ...any)) {
	if out, err := c.Run.Run(ctx, "nvidia-smi", "-L"); err != nil {
		problem("nvidia-smi -L: %v (MIG device UUIDs unknown)", err)
	} else if list, err := ParseList(string(out)); err != nil {
		problem("%v", err)
	} else {
		f.Sources = append(f.Sources, "nvidia-smi -L")
		for _, lg := range list {
			g := gpuByUUID(f, lg.UUID)
			if g == nil {
				problem("nvidia-smi -L lists %s, which nvidia-smi -q does not", lg.UUID)
				continue
			}
			for _, lm := range lg.MIG {
				for i := range g.MIG {
					if g.MIG[i].Index == lm.Device {
						g.MIG[i].UUID, g.MIG[i].Profile = lm.UUID, lm.Profile
					}
				}
			}
		}
	}
	if out, err := c.Run.Run(ctx, "nvidia-smi", "mig", "-lgi"); err != nil {
		problem("nvidia-smi mig -lgi: %v (MIG placements unknown)", err)
	} else if gis, err := ParseLGI(string(out)); err != nil {
		problem("%v", err)
	} else {
		f.Sources = append(f.Sources, "nvidia-smi mig -lgi")
		for _, gi := range gis {
			if gi.GPU < 0 || gi.GPU >= len(f.GPUs) {
				continue
			}
			g := &f.GPUs[gi.GPU]
			for i := range g.MIG {
				if g.MIG[i].GI == gi.ID {
					g.MIG[i].Start = gi.Start
					if g.MIG[i].Profile == "" {
						g.MIG[i].Profile = gi.Profile
					}
				}
			}
		}
	}
	if c.FS == nil {
		return
	}
	b, err := fs.ReadFile(c.FS, "proc/driver/nvidia-caps/mig-minors")
	if err != nil {
		problem("mig-minors: %v (MIG device nodes for containers unknown)", err)
		return
	}
	minors, err := ParseMIGMinors(string(b))
	if err != nil {
		problem("%v", err)
		return
	}
	f.Sources = append(f.Sources, "mig-minors")
	for gi := range f.GPUs {
		g := &f.GPUs[gi]
		for i := range g.MIG {
			if g.Minor >= 0 {
				g.MIG[i].GICap, g.MIG[i].CICap = minors.Access(g.Minor, g.MIG[i].GI, g.MIG[i].CI)
			}
		}
	}
}

// rdma reads the RDMA ports from sysfs, or from ibstat without it.
func (c *Collector) rdma(ctx context.Context, f *domain.HostFacts, problem func(string, ...any)) []IBPort {
	if c.FS != nil {
		ports, err := ReadInfiniband(c.FS, "sys/class/infiniband")
		if err == nil {
			f.Sources = append(f.Sources, "sysfs infiniband")
			return ports
		}
		if !errNotFound(err) {
			problem("sysfs: %v", err)
		}
	}
	out, err := c.Run.Run(ctx, "ibstat")
	if err != nil {
		problem("no RDMA devices found: neither sys/class/infiniband nor ibstat answered (%v)", err)
		return nil
	}
	ports, err := ParseIBStat(string(out))
	if err != nil {
		problem("%v", err)
		return nil
	}
	f.Sources = append(f.Sources, "ibstat")
	return ports
}

func anyMIG(f *domain.HostFacts) bool {
	for _, g := range f.GPUs {
		if g.MIGMode == "Enabled" {
			return true
		}
	}
	return false
}

func gpuByUUID(f *domain.HostFacts, uuid string) *domain.HostGPU {
	for i := range f.GPUs {
		if f.GPUs[i].UUID == uuid {
			return &f.GPUs[i]
		}
	}
	return nil
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// naturalLess orders mlx5_2 before mlx5_10.
func naturalLess(a, b string) bool {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb {
		return pa < pb
	}
	if na != nb {
		return na < nb
	}
	return a < b
}

func splitNum(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n := 0
	for _, c := range s[i:] {
		n = n*10 + int(c-'0')
		if n > 1<<20 {
			break
		}
	}
	return s[:i], n
}

// Fingerprint is a stable hash of facts: a heartbeat carries it, and the
// server asks for the facts again when it differs from the last report.
func Fingerprint(f *domain.HostFacts) string {
	b, err := json.Marshal(f)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}
