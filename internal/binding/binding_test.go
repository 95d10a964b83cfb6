package binding_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// host collects a recorded host (hostfacts' fixtures) and pins its
// baseline, as the state does on the first report.
func host(t *testing.T, name string) *domain.HostStatus {
	t.Helper()
	dir := os.DirFS(filepath.Join("..", "hostfacts", "testdata", "hosts", name))
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: name}
	f, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &domain.HostStatus{Node: "gpu-a1", Facts: f, Baseline: hostfacts.NewBaseline(f)}
}

func h100Server() *domain.Server {
	s := &domain.Server{Name: "gpu-a1", GPUModel: "H100-80GB", GPUs: 8, Driver: "535.183.01", GPUNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1}}
	for i := 0; i < 8; i++ {
		s.NICs = append(s.NICs, domain.NIC{Name: fmt.Sprintf("eth%d", i), RDMADevice: fmt.Sprintf("mlx5_%d", i), Rail: i, NUMA: i / 4, GPU: i})
	}
	return s
}

func a100Server() *domain.Server {
	return &domain.Server{Name: "gpu-a1", GPUModel: "A100-80GB", GPUs: 1, NICs: []domain.NIC{{Name: "eth0", RDMADevice: "mlx5_0", GPU: 0}}}
}

func job(id uint64, tenant string, pl domain.Placement) *domain.Job {
	return &domain.Job{ID: id, JobSpec: domain.JobSpec{Name: fmt.Sprintf("job-%d", id), Tenant: tenant, Workspace: "research"}, State: domain.JobRunning, Placement: []domain.Placement{pl}}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/binding -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestBindGolden(t *testing.T) {
	id := func(t string) binding.Identity {
		return binding.Identity{Tenant: t, Workspace: "research", Isolation: domain.IsolationGPU, VRF: t, L3VNI: 10001, GroupID: 1201}
	}
	tests := map[string]struct {
		in           func(t *testing.T) binding.Input
		wantWarnings []string
	}{
		"h100-whole-gpus": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(42, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{3, 0, 1, 2}}), Node: "gpu-a1",
				Server: h100Server(), RailOptimized: true, Host: host(t, "h100-roce"), Fabric: id("acme")}
		}, wantWarnings: []string{"network interfaces of NICs eth0 (mlx5_0), eth1 (mlx5_1), eth2 (mlx5_2), eth3 (mlx5_3) unknown", "verbs devices of mlx5_0, mlx5_1, mlx5_2, mlx5_3 unknown"}},
		"h100-roce-gid-index": {in: func(t *testing.T) binding.Input {
			h := host(t, "h100-roce")
			for i := range h.Facts.NICs {
				h.Facts.NICs[i].RoCEGID, h.Facts.NICs[i].Uverbs = 3, fmt.Sprintf("uverbs%d", i)
				h.Facts.NICs[i].Netdev = fmt.Sprintf("ens%dnp0", i)
			}
			return binding.Input{Job: job(43, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{4, 5}}), Node: "gpu-a1",
				Server: h100Server(), RailOptimized: true, Host: h, Fabric: id("acme")}
		}},
		"a100-mig-slices": {in: func(t *testing.T) binding.Input {
			mine := job(7, "globex", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 4}, {GPU: 0, Profile: "1g.20gb", Start: 2}}})
			other := job(8, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 0}}})
			return binding.Input{Job: mine, Node: "gpu-a1", Server: a100Server(), Host: host(t, "a100-mig"), Others: []domain.Job{*other}, Fabric: id("globex")}
		}, wantWarnings: []string{"NIC eth0 serves GPU 0, which another tenant's job also uses: it is not bound"}},
		"no-agent-yet": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(44, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{6, 7}}), Node: "gpu-a1", Server: h100Server(), Fabric: id("acme")}
		}, wantWarnings: []string{"has not reported its GPUs", "network interfaces of NICs eth6 (mlx5_6), eth7 (mlx5_7) unknown", "GPU device minors unknown", "verbs devices of mlx5_6, mlx5_7 unknown"}},
		"cpu-only": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(45, "acme", domain.Placement{Server: "gpu-a1"}), Node: "gpu-a1", Server: h100Server(), Host: host(t, "h100-roce"), Fabric: binding.Identity{Tenant: "acme", Workspace: "research"}}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := binding.Bind(tc.in(t))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".env.golden", []byte(b.Shell()))
			cdi, err := b.CDIJSON()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".cdi.json.golden", cdi)
			tp, err := b.TaskProlog()
			if err != nil {
				t.Fatal(err)
			}
			if tp != b.Shell() {
				t.Errorf("TaskProlog lines differ from shell lines for plain values:\n%s\n%s", tp, b.Shell())
			}
			if len(b.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %q", b.Warnings, tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(b.Warnings[i], w) {
					t.Errorf("warning %q, want one with %q", b.Warnings[i], w)
				}
			}
		})
	}
}

func TestBindRefuses(t *testing.T) {
	tests := map[string]struct {
		in        func(t *testing.T) binding.Input
		wantField string
		wantMsg   string
	}{
		"a pending job": {in: func(t *testing.T) binding.Input {
			j := job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}})
			j.State, j.Placement = domain.JobPending, nil
			return binding.Input{Job: j, Node: "gpu-a1", Server: h100Server()}
		}, wantField: "state", wantMsg: "job 1 is Pending: it holds no GPUs to bind"},
		"another node": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a2", GPUs: []int{0}}), Node: "gpu-a1", Server: h100Server()}
		}, wantField: "node", wantMsg: "job 1 holds nothing on node gpu-a1 (it runs on gpu-a2)"},
		"a vanished GPU": {in: func(t *testing.T) binding.Input {
			h := host(t, "h100-roce")
			h.Facts.GPUs = h.Facts.GPUs[:7]
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{6, 7}}), Node: "gpu-a1", Server: h100Server(), Host: h}
		}, wantField: "placement", wantMsg: "GPU 7 of node gpu-a1 (GPU-"},
		"a MIG slot the GPU does not have": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "3g.40gb", Start: 4}}}), Node: "gpu-a1", Server: a100Server(), Host: host(t, "a100-mig")}
		}, wantField: "placement", wantMsg: "GPU 0 of node gpu-a1 has no MIG 3g.40gb instance at slot 4"},
		"MIG disabled": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.10gb", Start: 0}}}), Node: "gpu-a1", Server: h100Server(), Host: host(t, "h100-roce")}
		}, wantField: "placement", wantMsg: "MIG is not enabled on GPU 0"},
		"MIG without any report": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 0}}}), Node: "gpu-a1", Server: a100Server()}
		}, wantField: "node", wantMsg: "node gpu-a1 has not reported its GPUs"},
		"MIG UUIDs not reported": {in: func(t *testing.T) binding.Input {
			h := host(t, "a100-mig")
			for i := range h.Facts.GPUs[0].MIG {
				h.Facts.GPUs[0].MIG[i].UUID = ""
			}
			return binding.Input{Job: job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 6}}}), Node: "gpu-a1", Server: a100Server(), Host: h}
		}, wantField: "placement", wantMsg: "did not report MIG UUIDs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := binding.Bind(tc.in(t))
			de, ok := err.(*domain.Error)
			if !ok || de.Code != domain.CodeFailedPrecondition || de.Field != tc.wantField || !strings.Contains(de.Message, tc.wantMsg) {
				t.Fatalf("error %v, want failed_precondition on %s with %q", err, tc.wantField, tc.wantMsg)
			}
		})
	}
}

// TestBindNamesOnlyWhatTheJobHolds is the isolation property: several
// tenants' jobs share one 8-GPU server (GPU isolation: whole GPUs and
// time-sliced shares), and no binding names a GPU UUID or an RDMA device
// of a GPU its job does not hold.
func TestBindNamesOnlyWhatTheJobHolds(t *testing.T) {
	h := host(t, "h100-roce")
	uuid := map[int]string{}
	for _, b := range h.Baseline {
		uuid[b.Index] = b.UUID
	}
	srv := h100Server()
	rng := rand.New(rand.NewSource(7))
	tenants := []string{"acme", "globex", "initech"}
	for round := 0; round < 200; round++ {
		// Deal the 8 GPUs to up to 5 jobs; a few GPUs are time-sliced by
		// two jobs of one tenant.
		var jobs []domain.Job
		perm := rng.Perm(8)
		for len(perm) > 0 {
			n := 1 + rng.Intn(min(4, len(perm)))
			gpus := slices.Clone(perm[:n])
			perm = perm[n:]
			t := tenants[rng.Intn(len(tenants))]
			id := uint64(len(jobs) + 1)
			if n == 1 && rng.Intn(2) == 0 {
				jobs = append(jobs, *job(id, t, domain.Placement{Server: "gpu-a1", GPUs: gpus, Share: 0.5}))
				jobs = append(jobs, *job(id+100, t, domain.Placement{Server: "gpu-a1", GPUs: gpus, Share: 0.5}))
				continue
			}
			jobs = append(jobs, *job(id, t, domain.Placement{Server: "gpu-a1", GPUs: gpus}))
		}
		for i := range jobs {
			j := &jobs[i]
			b, err := binding.Bind(binding.Input{Job: j, Node: "gpu-a1", Server: srv, RailOptimized: true, Host: h, Others: jobs})
			if err != nil {
				t.Fatal(err)
			}
			held := j.Placement[0].GPUs
			text := b.Shell()
			for g := 0; g < 8; g++ {
				named := strings.Contains(text, uuid[g])
				nic := fmt.Sprintf("mlx5_%d:", g)
				if named != slices.Contains(held, g) {
					t.Fatalf("round %d job %d (GPUs %v): GPU %d named=%t\n%s", round, j.ID, held, g, named, text)
				}
				if strings.Contains(text, nic) && !slices.Contains(held, g) {
					t.Fatalf("round %d job %d (GPUs %v) names %s\n%s", round, j.ID, held, nic, text)
				}
			}
			if len(b.NICs) != len(held) {
				t.Fatalf("round %d job %d: %d NICs for GPUs %v (one rail NIC each)", round, j.ID, len(b.NICs), held)
			}
		}
	}
}

// TestBindMIGAcrossTenants: two tenants hold MIG instances of one GPU;
// each binding names exactly its own instances.
func TestBindMIGAcrossTenants(t *testing.T) {
	h := host(t, "a100-mig")
	mig := map[int]string{}
	for _, m := range h.Facts.GPUs[0].MIG {
		mig[m.Start] = m.UUID
	}
	a := job(1, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 0}, {GPU: 0, Profile: "1g.20gb", Start: 6}}})
	g := job(2, "globex", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 2}, {GPU: 0, Profile: "1g.20gb", Start: 4}}})
	others := []domain.Job{*a, *g}
	for _, tc := range []struct {
		j     *domain.Job
		mine  []int
		other string
	}{{a, []int{0, 6}, "globex"}, {g, []int{2, 4}, "acme"}} {
		b, err := binding.Bind(binding.Input{Job: tc.j, Node: "gpu-a1", Server: a100Server(), Host: h, Others: others})
		if err != nil {
			t.Fatal(err)
		}
		env := b.Shell()
		for start, u := range mig {
			if strings.Contains(env, u) != slices.Contains(tc.mine, start) {
				t.Errorf("job %d: MIG at slot %d (%s) named=%t\n%s", tc.j.ID, start, u, !slices.Contains(tc.mine, start), env)
			}
		}
		if strings.Contains(env, h.Facts.GPUs[0].UUID) {
			t.Errorf("job %d names the parent GPU's UUID: it holds MIG instances only\n%s", tc.j.ID, env)
		}
		if len(b.NICs) != 0 {
			t.Errorf("job %d is bound NIC %v of a GPU another tenant shares", tc.j.ID, b.NICs)
		}
		if len(b.CDIDevices) != 2 || !strings.HasPrefix(b.CDIDevices[0], "nvidia.com/gpu=MIG-") {
			t.Errorf("CDI devices %v", b.CDIDevices)
		}
		if js, _ := json.Marshal(b); strings.Contains(string(js), tc.other) {
			t.Errorf("job %d's binding names the other tenant %s: %s", tc.j.ID, tc.other, js)
		}
	}
}
