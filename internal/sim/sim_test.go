package sim

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

var update = flag.Bool("update", false, "rewrite golden files")

func load(t *testing.T) ([]Node, []Pod) {
	t.Helper()
	f, err := os.Open("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := ReadNodes("nodes.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Open("testdata/pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pods, err := ReadPods("pods.csv", g)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

func TestReadRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, csv, field, rule string
		nodes                  bool
	}{
		{"missing column", "name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", "pods.header", "csv-header", false},
		{"not an integer", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,x,1,1,500\n", "pods[line 2].cpu_milli", "integer", false},
		{"milli out of range", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1500\n", "pods[line 2].gpu_milli", "range", false},
		{"shared multi-GPU", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n", "pods[line 2].gpu_milli", "gpu-share", false},
		{"duplicate pod", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,500\np,1,1,1,500\n", "pods[line 3].name", "unique", false},
		{"node without model", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", "nodes[line 2].model", "required", true},
		{"empty", "", "nodes", "csv-header", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.nodes {
				_, err = ReadNodes("nodes", strings.NewReader(tc.csv))
			} else {
				_, err = ReadPods("pods", strings.NewReader(tc.csv))
			}
			var de *domain.Error
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *domain.Error", err)
			}
			if de.Field != tc.field || len(de.Details) != 1 || de.Details[0].Rule != tc.rule {
				t.Fatalf("field %q rule %+v, want %q %q (%s)", de.Field, de.Details, tc.field, tc.rule, de.Message)
			}
		})
	}
	if err := CheckPolicy("worstfit"); err == nil || !strings.Contains(err.Error(), "worstfit") {
		t.Fatalf("CheckPolicy(worstfit) = %v", err)
	}
}

func TestOpenbProtocolAndPolicies(t *testing.T) {
	nodes, pods := load(t)
	if len(nodes) != 13 {
		t.Fatalf("%d GPU nodes, want 13 (the CPU-only node is left out)", len(nodes))
	}
	for _, p := range Policies {
		t.Run(p.Name, func(t *testing.T) {
			run := OpenbRun{Workload: "tiny", Nodes: nodes, Pods: pods, Policy: p.Name, Seed: 42, Tune: 4}
			a, err := RunOpenb(run, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := RunOpenb(run, nil)
			if a.Alloc != b.Alloc && !sameNaN(a.Alloc, b.Alloc) {
				t.Fatal("two runs with one seed differ")
			}
			if a.Pods != len(pods)+a.Appended || a.Appended <= 0 {
				t.Fatalf("pods %d = %d + appended %d", a.Pods, len(pods), a.Appended)
			}
			if a.Placed+a.Failed != a.Pods || a.FinalAlloc <= 0 || a.FinalAlloc > 100 {
				t.Fatalf("placed %d failed %d final %.2f", a.Placed, a.Failed, a.FinalAlloc)
			}
			n := 0
			for _, v := range a.Alloc {
				if !math.IsNaN(v) {
					n++
					if v > 100 {
						t.Fatalf("allocation %.2f %%", v)
					}
				}
			}
			if n < 20 {
				t.Fatalf("only %d columns filled", n)
			}
		})
	}
}

func sameNaN(a, b [131]float64) bool {
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

func TestOrderFollowsProtocol(t *testing.T) {
	nodes, pods := load(t)
	run := func(seed int64) ([]Pod, int, []Node) {
		return order(pods, nodes, 4, newRand(seed))
	}
	got, app, pref := run(1)
	// Every original pod first (shuffled), resampled ones after.
	seen := map[string]bool{}
	for _, p := range got[:len(pods)] {
		seen[p.Name] = true
	}
	if len(seen) != len(pods) || !strings.Contains(got[len(pods)].Name, "-tuned-0") || app != len(got)-len(pods) {
		t.Fatalf("originals %d of %d, first appended %q", len(seen), len(pods), got[len(pods)].Name)
	}
	var total, capacity int64
	for _, p := range got {
		total += p.TotalMilli()
	}
	for _, n := range nodes {
		capacity += int64(n.GPUs) * 1000
	}
	// The protocol compares the total plus the drawn pod's per-GPU milli
	// with the target, so a multi-GPU pod may overshoot it.
	if float64(total) > 4*float64(capacity)+8000 {
		t.Fatalf("demand %d over target %.0f", total, 4*float64(capacity))
	}
	down, removed, _ := order(pods, nodes, 0.3, newRand(1))
	total = 0
	for _, p := range down {
		total += p.TotalMilli()
	}
	if removed >= 0 || float64(total) > 0.3*float64(capacity) {
		t.Fatalf("tuning down: %d pods removed, demand %d over %d", -removed, total, capacity)
	}
	for i := 1; i < len(pref); i++ {
		if pref[i-1].Name >= pref[i].Name {
			t.Fatal("servers not in prefixed-name order")
		}
	}
	other, _, _ := run(2)
	if other[0].Name == got[0].Name && other[1].Name == got[1].Name && other[2].Name == got[2].Name {
		t.Fatal("seeds 1 and 2 gave the same order")
	}
}

func TestColumns(t *testing.T) {
	// 10 GPUs: arrivals at 10 % steps, allocation lagging.
	arrived := []int64{1000, 2000, 3000, 13000}
	used := []int64{1000, 2000, 2000, 9000}
	c := columns(arrived, used, 10)
	for _, tc := range []struct {
		x    int
		want float64
	}{{10, 10}, {20, 20}, {30, 20}, {130, 90}, {11, 10}} {
		if c[tc.x] != tc.want {
			t.Errorf("column %d = %v, want %v", tc.x, c[tc.x], tc.want)
		}
	}
	if !math.IsNaN(c[60]) {
		t.Errorf("column 60 = %v, want empty", c[60])
	}
}

func TestParseSeedsAndCluster(t *testing.T) {
	s, err := ParseSeeds("42-44,50")
	if err != nil || len(s) != 4 || s[0] != 42 || s[3] != 50 {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []string{"", "x", "5-3"} {
		if _, err := ParseSeeds(bad); err == nil {
			t.Errorf("ParseSeeds(%q) accepted", bad)
		}
	}
	if n, g, err := ParseCluster("128x8"); err != nil || n != 128 || g != 8 {
		t.Fatalf("%d %d %v", n, g, err)
	}
	if _, _, err := ParseCluster("8"); err == nil {
		t.Fatal("ParseCluster(8) accepted")
	}
}

func loadITP(t *testing.T) []Tenant {
	var ts []Tenant
	for _, name := range []string{"itp0", "itp1"} {
		f, err := os.Open(filepath.Join("testdata", name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		js, err := ReadITP(name, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, Tenant{Name: name, Jobs: js})
	}
	return ts
}

func TestJobsPolicies(t *testing.T) {
	ts := loadITP(t)
	for _, p := range JobsPolicies {
		t.Run(p, func(t *testing.T) {
			r, err := RunJobs(JobsRun{Tenants: ts, Servers: 3, GPUs: 8, Policy: p}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Jobs != 80 || r.Utilization <= 0 || r.Utilization > 100 || r.MeanJCTh <= 0 {
				t.Fatalf("%+v", r)
			}
			if p == "static" && (r.BorrowedGPUh != 0 || r.Preemptions != 0) {
				t.Fatalf("static borrowed %.1f GPU-hours, preempted %d", r.BorrowedGPUh, r.Preemptions)
			}
			if p != "static" && r.Completed != r.Jobs {
				t.Fatalf("%d of %d jobs completed", r.Completed, r.Jobs)
			}
			// jobfabric serves guaranteed demand within grace + one cycle
			// wherever a reclaim can place it at all.
			if p == "jobfabric" && (r.Reclaims == 0 || r.ReclaimOverBound != r.ReclaimFragmented) {
				t.Fatalf("jobfabric: %d guaranteed waits, %d over the bound, %d of them unplaceable by any reclaim", r.Reclaims, r.ReclaimOverBound, r.ReclaimFragmented)
			}
			r2, _ := RunJobs(JobsRun{Tenants: ts, Servers: 3, GPUs: 8, Policy: p}, nil)
			if r2.MeanJCTh != r.MeanJCTh || r2.Preemptions != r.Preemptions {
				t.Fatal("replay not deterministic")
			}
		})
	}
	if _, err := RunJobs(JobsRun{Tenants: ts, Servers: 3, GPUs: 8, Policy: "fifo"}, nil); err == nil {
		t.Fatal("policy fifo accepted")
	}
}

func TestGuarantees(t *testing.T) {
	ts := []Tenant{
		{Name: "a", Jobs: []ITPJob{{Submit: 0, Duration: 100, GPUs: 8}, {Submit: 0, Duration: 100, GPUs: 8}}},
		{Name: "b", Jobs: []ITPJob{{Submit: 0, Duration: 100, GPUs: 4}}},
	}
	p90, g := Guarantees(ts, 30)
	if p90[0] != 16 || p90[1] != 4 || g[0] != 24 || g[1] != 6 {
		t.Fatalf("p90 %v guarantees %v", p90, g)
	}
}

// TestReportGolden renders fixed inputs; go test -update rewrites the
// golden files.
func TestReportGolden(t *testing.T) {
	var rows, exp []AllocRow
	var runs []*OpenbResult
	for i, p := range []string{"05-BestFit", "06-FGD", "07-JobFabric"} {
		for seed := int64(42); seed < 44; seed++ {
			var a [131]float64
			for x := range a {
				a[x] = math.Min(float64(x), 90+float64(i)+float64(seed-42)/10)
			}
			rows = append(rows, AllocRow{Workload: "openb_pod_list_default", Policy: p, Tune: 1.3, Seed: seed, TotalGPUs: 10, Alloc: a})
			runs = append(runs, &OpenbResult{Workload: "openb_pod_list_default", Label: p, Seed: seed, FragRatio: 50 + float64(i), Seconds: 0.5, DecisionsPerSec: 1000,
				Sizes: map[string]*SizeCount{"share": {Arrived: 10, Placed: 8 + i, FirstFail: 95}, "8": {Arrived: 4, Placed: 1 + i, FirstFail: 20 + 30*float64(i)}}})
			if p != "07-JobFabric" {
				a[130] -= 0.25
				exp = append(exp, AllocRow{Workload: "openb_pod_list_default", Policy: p, Tune: 1.3, Seed: seed, TotalGPUs: 10, Alloc: a})
			}
		}
	}
	rep := OpenbReport(rows, runs, exp)
	var buf bytes.Buffer
	if err := WriteAllocCSV(&buf, []*OpenbResult{{Workload: "w", Label: "06-FGD", Tune: 1.3, Seed: 42, TotalGPUs: 10, Alloc: rows[0].Alloc}}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadAllocCSV("csv", &buf)
	if err != nil || back[0].Alloc[130] != rows[0].Alloc[130] {
		t.Fatalf("CSV round trip: %v", err)
	}
	jobs := JobsReport(JobsSummary{Kind: "jobs", Cluster: "2x8", Traces: []string{"a.csv"}, Runs: []*JobsResult{
		{Policy: "static", Utilization: 50, UtilizationArrivals: 55, Tenants: []TenantResult{{Name: "a", P90Demand: 8, Guaranteed: 16, Attainment: 90}}, UtilizationSer: []float64{10, 20, 30}},
		{Policy: "jobfabric", Utilization: 60, UtilizationArrivals: 65, Reclaims: 3, ReclaimP50s: 30, ReclaimP99s: 31, ReclaimMaxs: 40, ReclaimBounds: 32, ReclaimOverBound: 1, ReclaimFragmented: 1, Tenants: []TenantResult{{Name: "a", P90Demand: 8, Guaranteed: 16, Attainment: 100, Borrowed: 3}}, UtilizationSer: []float64{15, 25, 35}},
	}})
	for name, got := range map[string]string{
		"openb-report.md.golden": rep.Markdown, "openb-alloc-130.svg.golden": rep.Files["openb-alloc-130.svg"],
		"jobs-report.md.golden": jobs.Markdown, "jobs-utilization.svg.golden": jobs.Files["jobs-utilization.svg"],
	} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if string(want) != got {
			t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", name, got)
		}
	}
}

// TestJobsBoundAtEveryPoolSize: the small traces on pools of 2 to 6
// servers. Every guaranteed wait over grace + one cycle must be one no
// reclaim within the rules could serve, reported with its rule.
func TestJobsBoundAtEveryPoolSize(t *testing.T) {
	ts := loadITP(t)
	for servers := 2; servers <= 6; servers++ {
		r, err := RunJobs(JobsRun{Tenants: ts, Servers: servers, GPUs: 8, Policy: "jobfabric"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.OverBound) != r.ReclaimOverBound {
			t.Fatalf("%dx8: %d waits over the bound, %d recorded", servers, r.ReclaimOverBound, len(r.OverBound))
		}
		for _, w := range r.OverBound {
			if !strings.HasPrefix(w.Cause, "unservable: ") {
				t.Errorf("%dx8: %s job %s (%d GPUs) waited %.0f s, a servable wait (%s): %q", servers, w.Tenant, w.Job, w.GPUs, w.Seconds, w.Cause, w.Trail)
			}
		}
		t.Logf("%dx8: %d guaranteed waits, p99 %.0f s, %d over the bound", servers, r.Reclaims, r.ReclaimP99s, r.ReclaimOverBound)
	}
}
