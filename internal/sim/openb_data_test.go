package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The tests below replay the public openb traces, which are not part of
// the repository: they live in the project's shared data directory
// (../shared/data/traces beside a checkout of main, or JOBFABRIC_TRACES).
// Without it they skip, saying so.

func tracesDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("JOBFABRIC_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data", "traces")
	}
	if _, err := os.Stat(filepath.Join(dir, "openb", "openb_node_list_gpu_node.csv")); err != nil {
		t.Skipf("openb traces not found in %s (set JOBFABRIC_TRACES): %v", dir, err)
	}
	return dir
}

func loadOpenb(t *testing.T, dir, workload string) ([]Node, []Pod) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "openb", "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := ReadNodes("nodes", f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(filepath.Join(dir, "openb", workload+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pods, err := ReadPods(workload, g)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

func firstFail(r *OpenbResult) float64 {
	ff := math.Inf(1)
	for _, c := range r.Sizes {
		if c.FirstFail >= 0 {
			ff = math.Min(ff, c.FirstFail)
		}
	}
	return ff
}

// TestOpenbMatchesPublished: the seed-42 BestFit and FGD curves equal the
// published ones (the FGD paper's simulator) in every column 0..130. Until
// the first pod is turned away allocation is arrived demand whatever the
// placements, so only the columns after it check the placement path: the
// test asks that at least 20 of them are checked (they start at 6 % of
// demand in gpuspec20, at about 93 % in default). By default it replays
// multigpu20, multigpu30 and default (the first two have columns, 16 and
// 52, that only the reference's rounding gets right);
// JOBFABRIC_OPENB_ALL=1 replays all 17 workloads of the published file.
func TestOpenbMatchesPublished(t *testing.T) {
	dir := tracesDir(t)
	// The published seed-42 rows of BestFit and FGD, copied from
	// fgd-expected/analysis_allo_discrete.csv (the FGD paper's artifact).
	f, err := os.Open(filepath.Join("testdata", "fgd-published-seed42.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expected, err := ReadAllocCSV("fgd-published-seed42.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	pub := map[[2]string]AllocRow{}
	var all []string
	for _, e := range expected {
		if e.Seed != 42 || (e.Policy != "05-BestFit" && e.Policy != "06-FGD") {
			continue
		}
		if _, seen := pub[[2]string{e.Workload, "06-FGD"}]; !seen && e.Policy == "05-BestFit" {
			all = append(all, e.Workload)
		}
		pub[[2]string{e.Workload, e.Policy}] = e
	}
	workloads := []string{"openb_pod_list_multigpu20", "openb_pod_list_multigpu30", "openb_pod_list_default"}
	if os.Getenv("JOBFABRIC_OPENB_ALL") != "" {
		workloads = all
	}
	for _, w := range workloads {
		nodes, pods := loadOpenb(t, dir, w)
		for _, pol := range []string{"bestfit", "fgd"} {
			r, err := RunOpenb(OpenbRun{Workload: w, Nodes: nodes, Pods: pods, Policy: pol, Seed: 42, Tune: 1.3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := pub[[2]string{w, r.Label}]
			if !ok {
				t.Fatalf("%s %s: no published seed-42 row", w, r.Label)
			}
			ff := firstFail(r)
			after := 0
			for x := 0; x <= 130; x++ {
				if r.Alloc[x] != e.Alloc[x] {
					t.Errorf("%s %s column %d: %v, published %v (first pod turned away at %.2f %%)", w, r.Label, x, r.Alloc[x], e.Alloc[x], ff)
				}
				// Column x averages arrivals from x-0.5 % (x-1.5 % when it
				// borrows its neighbours).
				if float64(x)-1.5 > ff {
					after++
				}
			}
			if after < 20 {
				t.Errorf("%s %s: only %d columns after the first refusal at %.2f %%: the placements are hardly checked", w, r.Label, after, ff)
			}
		}
	}
}

// TestJobFabricWholeCurveOnCheckWorkload holds the JobFabric policy to the
// whole-curve targets on gpuspec20, a workload of the check set, with
// check seeds 47-49 (neither used to choose the policy), on seed means as
// the report judges them: in every column at least BestFit's and FGD's
// allocation minus 0.1 point, a higher mean over columns 0..130 than FGD,
// multi-GPU pods placed at least as often as FGD, and ahead of FGD at
// 130 %. It fails with the policy of 0ac60e6 (FGD's 95 % typical pods:
// 67 columns more than 0.1 below over seeds 42-51).
func TestJobFabricWholeCurveOnCheckWorkload(t *testing.T) {
	dir := tracesDir(t)
	const w = "openb_pod_list_gpuspec20"
	nodes, pods := loadOpenb(t, dir, w)
	var runs []*OpenbResult
	for _, pol := range []string{"bestfit", "fgd", "jobfabric"} {
		for seed := int64(47); seed <= 49; seed++ {
			r, err := RunOpenb(OpenbRun{Workload: w, Nodes: nodes, Pods: pods, Policy: pol, Seed: seed, Tune: 1.3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
	}
	rows := Rows(runs)
	got, ok := judge(rows, runs, w, nil)
	if !ok {
		t.Fatal("no jobfabric, FGD and BestFit rows")
	}
	cj, _ := seedMeanCurve(rows, w, "07-JobFabric")
	cf, _ := seedMeanCurve(rows, w, "06-FGD")
	cb, _ := seedMeanCurve(rows, w, "05-BestFit")
	if !got.column {
		for x := 0; x <= 130; x++ {
			if floor := math.Max(cf[x], cb[x]) - 0.1; cj[x] < floor-1e-9 {
				t.Errorf("column %d: jobfabric %.2f, below max(FGD %.2f, BestFit %.2f) - 0.1", x, cj[x], cf[x], cb[x])
			}
		}
	}
	if !got.mean {
		t.Errorf("mean over columns 0..130: jobfabric %.3f, FGD %.3f", curveMean(cj), curveMean(cf))
	}
	if !got.multi {
		t.Errorf("multi-GPU pods placed less often than under FGD")
	}
	if !got.end {
		t.Errorf("at 130 %%: jobfabric %.2f, FGD %.2f", cj[130], cf[130])
	}
}
