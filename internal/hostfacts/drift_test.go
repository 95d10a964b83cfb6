package hostfacts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// declaredH100 is the inventory entry matching the h100-roce recording:
// 8 H100s, NIC ethI on mlx5_I serving GPU I on rail I.
func declaredH100() *domain.Server {
	s := &domain.Server{Name: "gpu-a1", GPUModel: "H100-80GB", GPUs: 8, Driver: "535.183.01"}
	for i := 0; i < 8; i++ {
		s.NICs = append(s.NICs, domain.NIC{Name: fmt.Sprintf("eth%d", i), RDMADevice: fmt.Sprintf("mlx5_%d", i), Rail: i, NUMA: i / 4, GPU: i})
	}
	return s
}

func TestCompare(t *testing.T) {
	tests := map[string]struct {
		host          string
		rail          bool
		declare       func(s *domain.Server)
		facts         func(f *domain.HostFacts)
		baseline      func(f *domain.HostFacts) []domain.BaselineGPU
		peers         map[string]string
		wantKinds     []string
		wantInMessage string
	}{
		"matches the inventory": {host: "h100-roce", rail: true},
		"another driver": {host: "h100-roce", declare: func(s *domain.Server) { s.Driver = "550.54.15" },
			wantKinds: []string{domain.DriftDriver}, wantInMessage: "driver 535.183.01 is running, the inventory declares 550.54.15"},
		"another model": {host: "h100-roce", declare: func(s *domain.Server) { s.GPUModel = "H200-141GB" },
			wantKinds: []string{domain.DriftGPUModel}, wantInMessage: "GPU 0-7 is NVIDIA H100 80GB HBM3 (H100-80GB), the inventory declares H200-141GB"},
		"a GPU vanished": {host: "h100-roce",
			facts: func(f *domain.HostFacts) { f.GPUs = append(f.GPUs[:3:3], f.GPUs[4:]...) },
			baseline: func(f *domain.HostFacts) []domain.BaselineGPU {
				b := hostfacts.NewBaseline(f)
				return append(b, domain.BaselineGPU{Index: 3, UUID: "GPU-6b932a61-abfd-5ea1-b26a-7dea7f2fa601", PCIBusID: "00000000:86:00.0"})
			},
			wantKinds: []string{domain.DriftGPUCount, domain.DriftGPUMissing}, wantInMessage: "GPU 3 (GPU-6b932a61-abfd-5ea1-b26a-7dea7f2fa601, bus 00000000:86:00.0) is no longer reported"},
		"a GPU was replaced": {host: "h100-roce",
			baseline: func(f *domain.HostFacts) []domain.BaselineGPU {
				b := hostfacts.NewBaseline(f)
				b[5].UUID = "GPU-00000000-0000-0000-0000-000000000005"
				return b
			},
			wantKinds: []string{domain.DriftGPUMissing, domain.DriftGPUUUID}, wantInMessage: "is not in the server's GPU baseline"},
		"NICs of two rails swapped in the inventory": {host: "h100-roce", rail: true,
			declare:   func(s *domain.Server) { s.NICs[2].GPU, s.NICs[3].GPU = 3, 2 },
			wantKinds: []string{domain.DriftNICRail}, wantInMessage: "NIC eth2 (rail 2) is closest to GPU 2 (PIX), whose rail is 3: the inventory pairs it with GPU 3"},
		"swapped, not rail-optimized": {host: "h100-roce",
			declare:   func(s *domain.Server) { s.NICs[2].GPU, s.NICs[3].GPU = 3, 2 },
			wantKinds: []string{domain.DriftNICAffinity}, wantInMessage: "NIC eth3 is closest to GPU 3 (PIX), the inventory pairs it with GPU 2"},
		"a declared NIC is missing, another is down": {host: "h100-roce",
			declare:   func(s *domain.Server) { s.NICs[7].RDMADevice = "mlx5_99" },
			facts:     func(f *domain.HostFacts) { f.NICs[0].State = "DOWN" },
			wantKinds: []string{domain.DriftNICMissing, domain.DriftNICDown}, wantInMessage: "NIC eth7 (mlx5_99) is not reported"},
		"NICs matched by netdev when the inventory names no RDMA device": {host: "h100-roce",
			declare: func(s *domain.Server) {
				for i := range s.NICs {
					s.NICs[i].RDMADevice = ""
				}
			},
			wantKinds: []string{domain.DriftNICMissing}, wantInMessage: "NIC eth0 is not reported; NIC eth1 is not reported; NIC eth2 is not reported; NIC eth3 is not reported; and 4 more"},
		"PCIe GPUs declared as one NVLink domain": {host: "v100",
			declare: func(s *domain.Server) {
				s.GPUModel, s.Driver, s.NICs = "V100-32GB", "460.73.01", nil
			},
			facts:     func(f *domain.HostFacts) { f.NVLinkGroups = [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}} },
			wantKinds: []string{domain.DriftNVLink}, wantInMessage: "the GPUs form 2 NVLink groups [0-3] [4-7], the inventory declares one NVLink domain gpu-a1"},
		"a multi-node NVLink domain without fabric": {host: "h100-ib",
			declare:   func(s *domain.Server) { s.NICs = nil; s.NVLinkDomain = "rack-1" },
			peers:     map[string]string{"gpu-a2": "5b8e0a3e-1f2c-4d3b-9a6e-0c1d2e3f4a5b/1"},
			wantKinds: []string{domain.DriftNVLink}, wantInMessage: "NVLink domain rack-1 with 1 other servers"},
		"NVLink links down": {host: "h100-roce",
			facts:     func(f *domain.HostFacts) { f.GPUs[6].NVLinks, f.GPUs[6].NVLinksDown = 16, 2 },
			wantKinds: []string{domain.DriftNVLink}, wantInMessage: "GPU 6 has 2 of 18 NVLink links inactive"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := declaredH100()
			if tc.declare != nil {
				tc.declare(s)
			}
			f := collect(t, tc.host)
			base := hostfacts.NewBaseline(f)
			if tc.facts != nil {
				tc.facts(f)
			}
			if tc.baseline != nil {
				base = tc.baseline(f)
			}
			conds := hostfacts.Compare(hostfacts.DriftInput{Server: s, RailOptimized: tc.rail, Facts: f, Baseline: base, Peers: tc.peers})
			var kinds []string
			var msgs []string
			for _, c := range conds {
				kinds = append(kinds, c.Type)
				msgs = append(msgs, c.Message)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.wantKinds, ",") {
				t.Fatalf("kinds %v, want %v: %q", kinds, tc.wantKinds, msgs)
			}
			if tc.wantInMessage != "" && !strings.Contains(strings.Join(msgs, "\n"), tc.wantInMessage) {
				t.Fatalf("messages %q lack %q", msgs, tc.wantInMessage)
			}
		})
	}
}

func TestCompareFollowsGPUIdentityNotIndex(t *testing.T) {
	// GPU 3 fell off the bus: nvidia-smi renumbers 4..7 as 3..6. NIC
	// mlx5_4 is now "closest to GPU 3" by index, but that GPU is pinned
	// as declared GPU 4: no affinity drift, only the vanished GPU.
	s := declaredH100()
	f := collect(t, "h100-roce")
	base := hostfacts.NewBaseline(f)
	f.GPUs = append(f.GPUs[:3:3], f.GPUs[4:]...)
	for i := range f.GPUs {
		f.GPUs[i].Index = i
	}
	for i := range f.NICs {
		if f.NICs[i].GPU > 3 {
			f.NICs[i].GPU--
		}
		if f.NICs[i].GPU == 3 && f.NICs[i].RDMADevice == "mlx5_3" {
			f.NICs[i].GPU = -1
		}
	}
	conds := hostfacts.Compare(hostfacts.DriftInput{Server: s, RailOptimized: true, Facts: f, Baseline: base})
	for _, c := range conds {
		if c.Type == domain.DriftNICAffinity || c.Type == domain.DriftNICRail {
			t.Errorf("affinity drift from renumbered indices: %s", c.Message)
		}
	}
	if len(conds) != 2 || conds[0].Type != domain.DriftGPUCount || conds[1].Type != domain.DriftGPUMissing {
		t.Fatalf("conditions %+v", conds)
	}
}
