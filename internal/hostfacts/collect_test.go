package hostfacts_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// collect runs the collector over a recorded host directory, the way
// `jobfabric agent --fixture DIR` does.
func collect(t *testing.T, host string) *domain.HostFacts {
	t.Helper()
	dir := os.DirFS(filepath.Join("testdata", "hosts", host))
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: host}
	f, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCollectRecordedHosts(t *testing.T) {
	tests := map[string]struct {
		wantDriver   string
		wantGPUs     int
		wantModel    string
		wantNICs     int
		wantAffinity map[string]int // RDMA device -> closest GPU
		wantLayer    string
		wantGroups   int
		wantCPUs0    string
		wantSources  []string
		wantProblems []string
	}{
		"h100-roce": {wantDriver: "535.183.01", wantGPUs: 8, wantModel: "H100-80GB", wantNICs: 12, wantLayer: "Ethernet",
			wantAffinity: map[string]int{"mlx5_0": 0, "mlx5_5": 5, "mlx5_7": 7, "mlx5_8": -1, "mlx5_11": -1}, wantGroups: 1, wantCPUs0: "0-47,96-143",
			wantSources: []string{"nvidia-smi -q", "nvidia-smi topo -m", "ibstat"}},
		"h100-ib": {wantDriver: "535.183.01", wantGPUs: 8, wantModel: "H100-80GB", wantNICs: 9, wantLayer: "InfiniBand",
			wantAffinity: map[string]int{"mlx5_0": 0, "mlx5_1": 0, "mlx5_4": 2, "mlx5_7": 4, "mlx5_9": 5, "mlx5_bond_0": -1}, wantGroups: 1, wantCPUs0: "4,6,8,10,12",
			wantSources: []string{"nvidia-smi -q", "nvidia-smi topo -m", "sysfs infiniband"}},
		"a100-mig": {wantDriver: "535.54.03", wantGPUs: 1, wantModel: "A100-80GB",
			wantSources:  []string{"nvidia-smi -q -x", "nvidia-smi -L", "nvidia-smi mig -lgi", "mig-minors"},
			wantProblems: []string{"nvidia-smi topo -m", "no RDMA devices"}},
		"v100": {wantDriver: "460.73.01", wantGPUs: 8, wantModel: "V100-32GB",
			wantSources: []string{"nvidia-smi -q -x"}, wantProblems: []string{"nvidia-smi topo -m", "no RDMA devices"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := collect(t, name)
			if f.Driver != tc.wantDriver || len(f.GPUs) != tc.wantGPUs || len(f.NICs) != tc.wantNICs {
				t.Fatalf("driver %s, %d GPUs, %d NICs", f.Driver, len(f.GPUs), len(f.NICs))
			}
			for _, g := range f.GPUs {
				if g.Model != tc.wantModel {
					t.Errorf("GPU %d model %q", g.Index, g.Model)
				}
			}
			for _, n := range f.NICs {
				if want, ok := tc.wantAffinity[n.RDMADevice]; ok && n.GPU != want {
					t.Errorf("%s closest to GPU %d, want %d", n.RDMADevice, n.GPU, want)
				}
				if n.RDMADevice != "mlx5_bond_0" && n.LinkLayer != tc.wantLayer {
					t.Errorf("%s link layer %s", n.RDMADevice, n.LinkLayer)
				}
			}
			if len(f.NVLinkGroups) != tc.wantGroups {
				t.Errorf("NVLink groups %v", f.NVLinkGroups)
			}
			if tc.wantCPUs0 != "" && (f.GPUs[0].CPUs != tc.wantCPUs0 || f.GPUs[0].NUMA != 0 || f.GPUs[7].NUMA != 1) {
				t.Errorf("GPU 0 CPUs %q NUMA %d, GPU 7 NUMA %d", f.GPUs[0].CPUs, f.GPUs[0].NUMA, f.GPUs[7].NUMA)
			}
			if strings.Join(f.Sources, "|") != strings.Join(tc.wantSources, "|") {
				t.Errorf("sources %q, want %q", f.Sources, tc.wantSources)
			}
			if len(f.Problems) != len(tc.wantProblems) {
				t.Fatalf("problems %q, want %q", f.Problems, tc.wantProblems)
			}
			for i, p := range tc.wantProblems {
				if !strings.Contains(f.Problems[i], p) {
					t.Errorf("problem %q, want one about %s", f.Problems[i], p)
				}
			}
			if hostfacts.Fingerprint(f) != hostfacts.Fingerprint(collect(t, name)) {
				t.Error("two discoveries of the same host differ in fingerprint")
			}
		})
	}
}

func TestCollectMIGDevices(t *testing.T) {
	f := collect(t, "a100-mig")
	g := f.GPUs[0]
	if g.MIGMode != "Enabled" || len(g.MIG) != 4 || g.Minor != 1 {
		t.Fatalf("GPU %+v", g)
	}
	for i, m := range g.MIG {
		want := domain.HostMIGDevice{Index: i, GI: 3 + i, CI: 0, Profile: "1g.20gb", Start: 2 * i, MemoryMiB: 19968, SMs: 14,
			GICap: []int{57, 66, 75, 84}[i], CICap: []int{58, 67, 76, 85}[i], UUID: m.UUID}
		if m != want || !strings.HasPrefix(m.UUID, "MIG-") {
			t.Errorf("MIG device %d = %+v, want %+v", i, m, want)
		}
	}
}

// sysfsRoCE is a /sys tree with what the recorded one lacks: device
// links, NUMA nodes, netdevs, verbs devices and a RoCE GID table.
func sysfsRoCE() fstest.MapFS {
	link := func(to string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(to), Mode: fs.ModeSymlink} }
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s + "\n")} }
	m := fstest.MapFS{
		"sys/bus/pci/devices/0000:53:00.0/numa_node": file("0"),
		"sys/bus/pci/devices/0000:d1:00.0/numa_node": file("1"),
	}
	for i, d := range []struct{ dev, pci, netdev, numa string }{{"mlx5_0", "0000:54:00.0", "ens1np0", "0"}, {"mlx5_1", "0000:d2:00.0", "ens9np0", "1"}} {
		base := "sys/class/infiniband/" + d.dev
		dev := "sys/devices/pci0000:00/" + d.pci
		m[base+"/hca_type"] = file("MT4129")
		m[base+"/fw_ver"] = file("28.39.1002")
		m[base+"/device"] = link("../../../devices/pci0000:00/" + d.pci)
		m[dev+"/numa_node"] = file(d.numa)
		m[dev+"/net/"+d.netdev+"/dev_port"] = file("0")
		m[dev+"/infiniband_verbs/uverbs"+string(rune('0'+i))+"/ibdev"] = file(d.dev)
		p := base + "/ports/1/"
		m[p+"state"] = file("4: ACTIVE")
		m[p+"phys_state"] = file("5: LinkUp")
		m[p+"rate"] = file("400 Gb/sec (4X NDR)")
		m[p+"link_layer"] = file("Ethernet")
		for gid, typ := range []string{"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"} {
			n := string(rune('0' + gid))
			m[p+"gid_attrs/types/"+n] = file(typ)
			addr := "fe80:0000:0000:0000:a288:c2ff:fee3:142a"
			if gid >= 2 {
				addr = "0000:0000:0000:0000:0000:ffff:0a00:0" + string(rune('1'+i)) + "01"
			}
			m[p+"gids/"+n] = file(addr)
		}
	}
	return m
}

func TestReadInfinibandWithDeviceLinks(t *testing.T) {
	ports, err := hostfacts.ReadInfiniband(sysfsRoCE(), "sys/class/infiniband")
	if err != nil {
		t.Fatal(err)
	}
	want := []hostfacts.IBPort{
		{Device: "mlx5_0", Port: 1, HCAType: "MT4129", Firmware: "28.39.1002", State: "ACTIVE", PhysState: "LinkUp", RateGbps: 400, LinkLayer: "Ethernet",
			Netdev: "ens1np0", PCIBusID: "0000:54:00.0", NUMA: 0, RoCEGID: 3, Uverbs: "uverbs0"},
		{Device: "mlx5_1", Port: 1, HCAType: "MT4129", Firmware: "28.39.1002", State: "ACTIVE", PhysState: "LinkUp", RateGbps: 400, LinkLayer: "Ethernet",
			Netdev: "ens9np0", PCIBusID: "0000:d2:00.0", NUMA: 1, RoCEGID: 3, Uverbs: "uverbs1"},
	}
	if len(ports) != len(want) {
		t.Fatalf("ports %+v", ports)
	}
	for i := range want {
		if ports[i] != want[i] {
			t.Errorf("port %d = %+v\nwant     %+v", i, ports[i], want[i])
		}
	}
	if n := hostfacts.ReadNUMA(sysfsRoCE(), "00000000:D1:00.0"); n != 1 {
		t.Errorf("GPU NUMA %d, want 1", n)
	}
	if _, err := hostfacts.ReadInfiniband(fstest.MapFS{}, "sys/class/infiniband"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing tree: %v", err)
	}
}

func TestCollectWithoutGPUsFails(t *testing.T) {
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: fstest.MapFS{}}}
	_, err := c.Collect(context.Background())
	if domain.CodeOf(err) != domain.CodeFailedPrecondition || !strings.Contains(err.Error(), "nvidia-smi") {
		t.Fatalf("error %v", err)
	}
}
