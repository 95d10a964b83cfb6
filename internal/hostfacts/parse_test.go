package hostfacts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseQuery(t *testing.T) {
	tests := map[string]struct {
		file              string
		xml               bool
		wantDriver        string
		wantGPUs          int
		wantProduct       string
		wantModel         string
		wantMemoryMiB     int
		wantFirstUUID     string
		wantFirstBus      string
		wantLastMinor     int
		wantMIGMode       string
		wantMIGDevices    int
		wantMIGFirstGI    int
		wantMIGMemoryMiB  int
		wantMIGMultiprocs int
	}{
		"v100 xml, 8 GPUs, no MIG": {file: "nvidia-smi-q-x_8x-tesla-v100s-pcie-32gb_460.73.01_datakit.xml", xml: true,
			wantDriver: "460.73.01", wantGPUs: 8, wantProduct: "Tesla V100S-PCIE-32GB", wantModel: "V100-32GB", wantMemoryMiB: 32510,
			wantFirstUUID: "GPU-76098dc1-d3bc-9a1b-7ea6-f7b48837829e", wantFirstBus: "00000000:00:0D.0", wantLastMinor: 7},
		"a100 xml, MIG enabled with 4 devices": {file: "nvidia-smi-q-x_a100-sxm4-80gb_mig-enabled_telegraf.xml", xml: true,
			wantDriver: "535.54.03", wantGPUs: 1, wantProduct: "NVIDIA A100-SXM4-80GB", wantModel: "A100-80GB", wantMemoryMiB: 81920,
			wantFirstUUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298", wantFirstBus: "00000000:01:00.0", wantLastMinor: 1,
			wantMIGMode: "Enabled", wantMIGDevices: 4, wantMIGFirstGI: 3, wantMIGMemoryMiB: 19968, wantMIGMultiprocs: 14},
		"h100 text, 8 GPUs": {file: "nvidia-smi-q_text_8x-h100-80gb-hbm3_535.183.01_gpud.txt",
			wantDriver: "535.183.01", wantGPUs: 8, wantProduct: "NVIDIA H100 80GB HBM3", wantModel: "H100-80GB", wantMemoryMiB: 81559,
			wantFirstUUID: "GPU-566e6f65-c38e-b12f-4824-6944218668b9", wantFirstBus: "00000000:53:00.0", wantLastMinor: 7, wantMIGMode: "Disabled"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := read(t, tc.file)
			var q *hostfacts.Query
			var err error
			if tc.xml {
				q, err = hostfacts.ParseQueryXML(b)
			} else {
				q, err = hostfacts.ParseQueryText(string(b))
			}
			if err != nil {
				t.Fatal(err)
			}
			if q.Driver != tc.wantDriver || len(q.GPUs) != tc.wantGPUs {
				t.Fatalf("driver %q, %d GPUs; want %q, %d", q.Driver, len(q.GPUs), tc.wantDriver, tc.wantGPUs)
			}
			g0, gl := q.GPUs[0], q.GPUs[len(q.GPUs)-1]
			if g0.Product != tc.wantProduct || g0.MemoryMiB != tc.wantMemoryMiB || g0.UUID != tc.wantFirstUUID || g0.PCIBusID != tc.wantFirstBus {
				t.Errorf("GPU 0 = %+v", g0)
			}
			if m := hostfacts.ModelOf(g0.Product, g0.MemoryMiB); m != tc.wantModel {
				t.Errorf("model %q, want %q", m, tc.wantModel)
			}
			if gl.Minor != tc.wantLastMinor || g0.MIGMode != tc.wantMIGMode || len(g0.MIG) != tc.wantMIGDevices {
				t.Errorf("last minor %d, MIG mode %q with %d devices; want %d, %q, %d", gl.Minor, g0.MIGMode, len(g0.MIG), tc.wantLastMinor, tc.wantMIGMode, tc.wantMIGDevices)
			}
			for i, g := range q.GPUs {
				if g.Index != i || !strings.HasPrefix(g.UUID, "GPU-") {
					t.Errorf("GPU %d: index %d uuid %q", i, g.Index, g.UUID)
				}
			}
			if tc.wantMIGDevices > 0 {
				m := g0.MIG[0]
				if m.GI != tc.wantMIGFirstGI || m.MemoryMiB != tc.wantMIGMemoryMiB || m.SMs != tc.wantMIGMultiprocs || m.CI != 0 {
					t.Errorf("MIG device 0 = %+v", m)
				}
			}
		})
	}
}

func TestParseQueryRejects(t *testing.T) {
	tests := map[string]struct {
		text, wantField string
		xml             bool
	}{
		"not xml":          {text: "Driver Version : 1", xml: true, wantField: "xml"},
		"no driver":        {text: "<nvidia_smi_log><gpu id=\"1\"><uuid>GPU-1</uuid><fb_memory_usage><total>1 MiB</total></fb_memory_usage></gpu></nvidia_smi_log>", xml: true, wantField: "driver_version"},
		"bad memory":       {text: "<nvidia_smi_log><driver_version>1.2</driver_version><gpu id=\"1\"><uuid>GPU-1</uuid><fb_memory_usage><total>lots</total></fb_memory_usage></gpu></nvidia_smi_log>", xml: true, wantField: "gpu[0].fb_memory_usage.total"},
		"text, no driver":  {text: "GPU 00000000:01:00.0\n    Product Name : X\n", wantField: "Driver Version"},
		"text, bad uuid":   {text: "Driver Version : 535.1\nGPU 00000000:01:00.0\n    GPU UUID : nope\n    FB Memory Usage\n        Total : 10 MiB\n", wantField: "GPU 00000000:01:00.0"},
		"text, no memory ": {text: "Driver Version : 535.1\nGPU 00000000:01:00.0\n    GPU UUID : GPU-1\n", wantField: "GPU 00000000:01:00.0 FB Memory Usage.Total"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.xml {
				_, err = hostfacts.ParseQueryXML([]byte(tc.text))
			} else {
				_, err = hostfacts.ParseQueryText(tc.text)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("error %v, want one naming %s", err, tc.wantField)
			}
		})
	}
}

func TestParseTopo(t *testing.T) {
	tests := map[string]struct {
		file        string
		wantGPUs    int
		wantNICs    int
		wantClosest map[string]int // NIC -> GPU (-1: none)
		wantCPU0    string
		wantNUMA7   int
		wantGroups  int
		wantNVLinks int
	}{
		"8 GPUs, 8 NICs one per GPU": {file: "nvidia-smi-topo-m_8x-h100-80gb-hbm3_8nic_sglang-issue-30401.txt", wantGPUs: 8, wantNICs: 8,
			wantClosest: map[string]int{"mlx5_0": 0, "mlx5_3": 3, "mlx5_4": 4, "mlx5_7": 7}, wantCPU0: "0-47,96-143", wantNUMA7: 1, wantGroups: 1, wantNVLinks: 18},
		"8 GPUs, 12 NICs, several per PCIe switch": {file: "nvidia-smi-topo-m_8gpu-nv18_12nic-cx7-ib_mooncake-issue-2039.txt", wantGPUs: 8, wantNICs: 12,
			wantClosest: map[string]int{"mlx5_0": 0, "mlx5_1": 0, "mlx5_2": 0, "mlx5_3": 1, "mlx5_5": 3, "mlx5_8": 4, "mlx5_9": 5, "mlx5_11": 7},
			wantCPU0:    "4,6,8,10,12", wantNUMA7: 1, wantGroups: 1, wantNVLinks: 18},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			topo, err := hostfacts.ParseTopo(string(read(t, tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if topo.GPUs != tc.wantGPUs || len(topo.NICs) != tc.wantNICs {
				t.Fatalf("%d GPUs, NICs %v", topo.GPUs, topo.NICs)
			}
			for nic, want := range tc.wantClosest {
				col := -1
				for i, n := range topo.NICs {
					if n == nic {
						col = i
					}
				}
				if g, path := topo.ClosestGPU(col); g != want || (want >= 0 && path != "PIX") {
					t.Errorf("%s closest to GPU %d (%s), want %d (PIX)", nic, g, path, want)
				}
			}
			if topo.CPUAffinity[0] != tc.wantCPU0 || topo.NUMAAffinity[7] != tc.wantNUMA7 || topo.NUMAAffinity[0] != 0 {
				t.Errorf("affinity %q numa %v", topo.CPUAffinity[0], topo.NUMAAffinity)
			}
			if g := topo.NVLinkGroups(); len(g) != tc.wantGroups || len(g[0]) != tc.wantGPUs {
				t.Errorf("NVLink groups %v", g)
			}
			if n := topo.NVLinks(0, 7); n != tc.wantNVLinks {
				t.Errorf("NVLinks(0,7) = %d", n)
			}
			if numa := topo.NICNUMA(len(topo.NICs) - 1); numa != 1 {
				t.Errorf("last NIC NUMA %d, want 1", numa)
			}
		})
	}
}

func TestParseTopoPCIeOnlyAndErrors(t *testing.T) {
	// A PCIe-only server (no NVLink): two GPUs under one switch, a NIC on
	// the other socket reaching both equally.
	pcie := "        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity\n" +
		"GPU0     X      PIX     SYS     0-15            0\n" +
		"GPU1    PIX      X      SYS     0-15            0\n" +
		"NIC0    SYS     SYS      X \n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
	topo, err := hostfacts.ParseTopo(pcie)
	if err != nil {
		t.Fatal(err)
	}
	if g := topo.NVLinkGroups(); len(g) != 2 {
		t.Errorf("groups %v, want two singletons", g)
	}
	if g, _ := topo.ClosestGPU(0); g != -1 {
		t.Errorf("a NIC reaching two GPUs across sockets is closest to GPU %d, want none", g)
	}
	if topo.NICNUMA(0) != -1 {
		t.Errorf("NIC NUMA %d, want unknown", topo.NICNUMA(0))
	}
	tests := map[string]struct{ text, want string }{
		"no header":     {text: "nothing here", want: "header"},
		"asymmetric":    {text: "   GPU0 GPU1\nGPU0 X NV1\nGPU1 PIX X\n", want: "not symmetric"},
		"unknown cell":  {text: "   GPU0 GPU1\nGPU0 X FOO\nGPU1 FOO X\n", want: "not a connection type"},
		"short row":     {text: "   GPU0 GPU1\nGPU0 X\nGPU1 NV1 X\n", want: "row has"},
		"bad diagonal":  {text: "   GPU0 GPU1\nGPU0 PIX PIX\nGPU1 PIX X\n", want: "diagonal"},
		"GPUs in order": {text: "   GPU0 GPU2\nGPU0 X PIX\nGPU2 PIX X\n", want: "want GPU1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := hostfacts.ParseTopo(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseIBStat(t *testing.T) {
	tests := map[string]struct {
		file          string
		wantPorts     int
		wantLayer     string
		wantFirstType string
		wantFirstFW   string
		wantRates     map[string]int
		// wantOther: ports of another link layer (a bonded Ethernet port
		// next to the InfiniBand ones).
		wantOther map[string]string
	}{
		"RoCE, ConnectX-7 and ConnectX-6 Dx": {file: "ibstat_h100-server_connectx7-roce-ethernet_gpud.txt", wantPorts: 12, wantLayer: "Ethernet",
			wantFirstType: "MT4129", wantFirstFW: "28.39.1002", wantRates: map[string]int{"mlx5_0": 400, "mlx5_1": 100}},
		"InfiniBand, 8 ConnectX-7 and a bond": {file: "ibstat_h100-server_connectx7-infiniband_gpud.txt", wantPorts: 9, wantLayer: "InfiniBand",
			wantFirstType: "MT4129", wantFirstFW: "28.41.1000", wantRates: map[string]int{"mlx5_0": 400, "mlx5_bond_0": 200},
			wantOther: map[string]string{"mlx5_bond_0": "Ethernet"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ports, err := hostfacts.ParseIBStat(string(read(t, tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if len(ports) != tc.wantPorts {
				t.Fatalf("%d ports, want %d", len(ports), tc.wantPorts)
			}
			if p := ports[0]; p.HCAType != tc.wantFirstType || p.Firmware != tc.wantFirstFW || p.Port != 1 {
				t.Errorf("first port %+v", p)
			}
			for _, p := range ports {
				layer := tc.wantLayer
				if l, ok := tc.wantOther[p.Device]; ok {
					layer = l
				}
				if p.LinkLayer != layer || p.State != "ACTIVE" || p.PhysState != "LinkUp" {
					t.Errorf("port %+v", p)
				}
				if want, ok := tc.wantRates[p.Device]; ok && p.RateGbps != want {
					t.Errorf("%s rate %d, want %d", p.Device, p.RateGbps, want)
				}
			}
		})
	}
	if _, err := hostfacts.ParseIBStat("State: Active\n"); err == nil {
		t.Error("a port line before any CA was accepted")
	}
}

func TestReadInfinibandRecordedTree(t *testing.T) {
	ports, err := hostfacts.ReadInfiniband(os.DirFS("testdata"), "sys-class-infiniband-h100")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		layer string
		rate  int
	}{"mlx5_0": {"InfiniBand", 400}, "mlx5_9": {"InfiniBand", 400}, "mlx5_bond_0": {"Ethernet", 200}}
	if len(ports) != 9 {
		t.Fatalf("%d ports, want 9", len(ports))
	}
	for _, p := range ports {
		if p.State != "ACTIVE" || p.HCAType == "" || p.Firmware == "" {
			t.Errorf("port %+v", p)
		}
		if w, ok := want[p.Device]; ok && (p.LinkLayer != w.layer || p.RateGbps != w.rate) {
			t.Errorf("%s: %s %d, want %s %d", p.Device, p.LinkLayer, p.RateGbps, w.layer, w.rate)
		}
		// The recorded tree has no device links: PCI facts stay unknown.
		if p.PCIBusID != "" || p.NUMA != -1 || p.Netdev != "" || p.RoCEGID != -1 {
			t.Errorf("%s: invented PCI facts %+v", p.Device, p)
		}
	}
}

func TestParseNVLinkStatus(t *testing.T) {
	st, err := hostfacts.ParseNVLinkStatus(string(read(t, "nvidia-smi-nvlink-status_a100_gpud.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) < 4 {
		t.Fatalf("%d GPUs", len(st))
	}
	for _, g := range st {
		if g.Up != 12 || g.Down != 0 || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %+v, want 12 active links", g)
		}
	}
	down, err := hostfacts.ParseNVLinkStatus("GPU 0: X (UUID: GPU-1)\n   Link 0: 25 GB/s\n   Link 1: <inactive>\n")
	if err != nil || down[0].Up != 1 || down[0].Down != 1 {
		t.Fatalf("%+v %v", down, err)
	}
}

func TestParseMIGOutputs(t *testing.T) {
	list, err := hostfacts.ParseList(string(read(t, "synthetic/nvidia-smi-L_a100-mig.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[0].MIG) != 4 || list[0].MIG[3].Device != 3 || list[0].MIG[0].Profile != "1g.20gb" || !strings.HasPrefix(list[0].MIG[0].UUID, "MIG-") {
		t.Fatalf("list %+v", list)
	}
	gis, err := hostfacts.ParseLGI(string(read(t, "synthetic/nvidia-smi-mig-lgi_a100-mig.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(gis) != 4 || gis[2] != (hostfacts.GPUInstance{GPU: 0, Profile: "1g.20gb", ProfileID: 15, ID: 5, Start: 4, Size: 2}) {
		t.Fatalf("gis %+v", gis)
	}
	minors, err := hostfacts.ParseMIGMinors(string(read(t, "synthetic/mig-minors_a100-mig.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if gi, ci := minors.Access(1, 4, 0); gi != 66 || ci != 67 {
		t.Fatalf("access caps %d %d", gi, ci)
	}
	bad := map[string]struct {
		parse func(string) error
		text  string
	}{
		"-L line without uuid":   {func(s string) error { _, err := hostfacts.ParseList(s); return err }, "GPU 0: NVIDIA X\n"},
		"-L MIG before any GPU":  {func(s string) error { _, err := hostfacts.ParseList(s); return err }, "  MIG 1g.10gb Device 0: (UUID: MIG-1)\n"},
		"-lgi short row":         {func(s string) error { _, err := hostfacts.ParseLGI(s); return err }, "|====|\n|  0  MIG 1g.10gb 19 |\n"},
		"-lgi non-numeric start": {func(s string) error { _, err := hostfacts.ParseLGI(s); return err }, "|====|\n|  0  MIG 1g.10gb 19 7 x:1 |\n"},
		"mig-minors no minor":    {func(s string) error { _, err := hostfacts.ParseMIGMinors(s); return err }, "gpu0/gi1/access\n"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			if err := tc.parse(tc.text); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestModelOf(t *testing.T) {
	tests := map[string]struct {
		product string
		mib     int
		want    string
	}{
		"H100 SXM":          {"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
		"H100 NVL":          {"NVIDIA H100 NVL", 95830, "H100-94GB"},
		"H200":              {"NVIDIA H200", 143771, "H200-141GB"},
		"A100 40GB":         {"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
		"GB200 not B200":    {"NVIDIA GB200", 189471, "GB200"},
		"B200":              {"NVIDIA B200", 183359, "B200-180GB"},
		"V100 16GB unknown": {"Tesla V100-SXM2-16GB", 16384, ""},
		"unknown family":    {"NVIDIA RTX A6000", 49140, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hostfacts.ModelOf(tc.product, tc.mib); got != tc.want {
				t.Fatalf("ModelOf(%q, %d) = %q, want %q", tc.product, tc.mib, got, tc.want)
			}
		})
	}
}
