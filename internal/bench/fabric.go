package bench

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// FabricOptions size the fabric benchmark; the zero value is issue #4's
// target: 32 stripes x 64 servers x 8 GPUs (256 leaves, 2,048 servers,
// 16,384 GPUs), 16 spines, 1,000 tenants, 10,000 running jobs.
type FabricOptions struct {
	Stripes, ServersPerStripe, Spines int
	// SuperSpines > 0 makes the fabric three-tier, of Pods pods (Spines
	// spines each).
	SuperSpines, Pods int
	Tenants, Jobs     int
	// Runs is how many full compile + verify runs the medians are of
	// (default 5); Starts how many single job starts are timed (default 101).
	Runs, Starts int
	// Placement is "all" (default: every tenant's VRF on every leaf) or "used".
	Placement fabric.VRFPlacement
	// NOS of every switch ("" = the topology generator's default, frr);
	// it changes nothing the compiler or verifier does.
	NOS string
}

// FabricResult is what the fabric benchmark measured. Times are medians,
// with the fastest and slowest run.
type FabricResult struct {
	Leaves      int                 `json:"leaves"`
	Spines      int                 `json:"spines"`
	SuperSpines int                 `json:"superSpines,omitempty"`
	Servers     int                 `json:"servers"`
	GPUs        int                 `json:"gpus"`
	Tenants     int                 `json:"tenants"`
	Jobs        int                 `json:"jobs"`
	Ports       int                 `json:"ports"`
	VRFs        int                 `json:"vrfs"` // VRF instances (leaf, VRF)
	Placement   fabric.VRFPlacement `json:"placement"`
	Runs        int                 `json:"runs"`
	CompileMs   Spread              `json:"compileMs"`
	VerifyMs    Spread              `json:"verifyMs"`
	FullMs      Spread              `json:"fullMs"` // compile + verify
	VerifyOK    bool                `json:"verifyOk"`
	NewCompiler float64             `json:"newCompilerMs"` // building the incremental compiler, once
	Starts      int                 `json:"starts"`
	// StartMs is Compiler.Apply of one job start (allocation; group and
	// contract when the tenant is segmented; link ids when vlan-aware);
	// StopMs of the stop that undoes it.
	StartMs    Spread  `json:"startMs"`
	StartP90Ms float64 `json:"startP90Ms"`
	StopMs     Spread  `json:"stopMs"`
	// Devices is the median number of devices one start recompiled and
	// changed.
	Devices int `json:"devices"`
	// IncrementalOK: after the starts and stops the incremental intent
	// equals a full compile, and an intent after one start verifies.
	IncrementalOK bool    `json:"incrementalOk"`
	PeakRSSMiB    float64 `json:"peakRssMiB"`
	HeapMiB       float64 `json:"heapMiB"` // live heap after the run (intent, compiler, verifier inputs)
}

// Spread is a median with the fastest and slowest value.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spread(ms []float64) Spread {
	s := slices.Clone(ms)
	slices.Sort(s)
	return Spread{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// Fabric runs the fabric benchmark: it builds the cluster
// (fabrictest.Scale), times Runs full compiles each followed by a verify,
// then builds an incremental Compiler and times Starts single job starts
// on free servers (tenants rotating over every isolation mode, network
// model and segmentation; 1, 2, 4 or 8 GPUs), each undone by a timed stop.
func Fabric(o FabricOptions) (*FabricResult, error) {
	if o.Runs == 0 {
		o.Runs = 5
	}
	if o.Starts == 0 {
		o.Starts = 101
	}
	if o.Runs < 1 || o.Runs > 1000 {
		return nil, domain.Invalid("runs", "runs %d must be between 1 and 1000", o.Runs)
	}
	if o.Starts < 1 || o.Starts > 100_000 {
		return nil, domain.Invalid("starts", "starts %d must be between 1 and 100000", o.Starts)
	}
	switch o.Placement {
	case "":
		o.Placement = fabric.VRFsOnAllLeaves
	case fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed:
	default:
		return nil, domain.Invalid("placement", "placement %q is not %s or %s", o.Placement, fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed)
	}
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: o.Stripes, ServersPerStripe: o.ServersPerStripe, Spines: o.Spines,
		SuperSpines: o.SuperSpines, Pods: o.Pods, Tenants: o.Tenants, Jobs: o.Jobs, NOS: o.NOS, Placement: o.Placement})
	if err != nil {
		return nil, domain.Invalid("options", "%v", err)
	}
	sum := in.Topology.Summary()
	res := &FabricResult{Leaves: sum.Leaves, Spines: sum.Spines, SuperSpines: sum.SuperSpines, Servers: sum.Servers, GPUs: sum.GPUs, Tenants: len(in.Tenants),
		Jobs: countJobs(in), Placement: o.Placement, Runs: o.Runs, Starts: o.Starts, VerifyOK: true}

	var compileMs, verifyMs, fullMs []float64
	var full *fabric.Intent
	for range o.Runs {
		runtime.GC() // each run starts from the same heap, not the last run's garbage
		t0 := time.Now()
		it, err := fabric.Compile(in)
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		r := verify.Verify(in, it)
		compileMs = append(compileMs, float64(t1.Sub(t0).Nanoseconds())/1e6)
		verifyMs = append(verifyMs, msSince(t1))
		fullMs = append(fullMs, msSince(t0))
		if !r.OK() {
			res.VerifyOK = false
		}
		res.Ports, res.VRFs = r.Stats.Endpoints, r.Stats.VRFs
		full = it
	}
	res.CompileMs, res.VerifyMs, res.FullMs = spread(compileMs), spread(verifyMs), spread(fullMs)

	t0 := time.Now()
	k, err := fabric.NewCompiler(in)
	if err != nil {
		return nil, err
	}
	res.NewCompiler = msSince(t0)
	free := fabrictest.FreeServers(in)
	if len(free) == 0 {
		return nil, domain.Invalid("jobs", "%d jobs leave no server free to start one on", o.Jobs)
	}
	// Prepare every change first (link ids of vlan-aware tenants come from
	// an ownership pass over the whole input, as the state machine's pools
	// would give them), so the timed loop sees only Apply.
	sizes := []int{1, 2, 4, 8}
	type job struct {
		next        fabric.Input
		start, stop fabric.Change
		tenant      string
	}
	jobs := make([]job, o.Starts)
	for i := range jobs {
		tenant := in.Tenants[(i*7)%len(in.Tenants)]
		gpus := make([]int, sizes[i%len(sizes)])
		for g := range gpus {
			gpus[g] = g
		}
		next, start, err := fabrictest.StartJob(in, tenant.Name, free[i%len(free)], fmt.Sprint("bench-", i), gpus, uint16(50000+i%10000))
		if err != nil {
			return nil, err
		}
		jobs[i] = job{start: start, stop: fabrictest.StopJob(start), tenant: tenant.Name}
		if i == 0 {
			jobs[i].next = next
		}
	}
	var startMs, stopMs []float64
	var devices []int
	res.IncrementalOK = true
	runtime.GC()
	for i, j := range jobs {
		t := time.Now()
		devs, err := k.Apply(j.start)
		if err != nil {
			return nil, fmt.Errorf("start %d (tenant %s): %w", i, j.tenant, err)
		}
		startMs = append(startMs, msSince(t))
		devices = append(devices, len(devs))
		if i == 0 {
			if r := verify.Verify(j.next, k.Intent()); !r.OK() {
				res.IncrementalOK = false
			}
			runtime.GC()
		}
		t = time.Now()
		if _, err := k.Apply(j.stop); err != nil {
			return nil, fmt.Errorf("stop %d (tenant %s): %w", i, j.tenant, err)
		}
		stopMs = append(stopMs, msSince(t))
	}
	res.StartMs, res.StopMs = spread(startMs), spread(stopMs)
	slices.Sort(startMs)
	res.StartP90Ms = startMs[len(startMs)*9/10]
	slices.Sort(devices)
	res.Devices = devices[len(devices)/2]
	// After every start was stopped, the incremental intent is the
	// original full compile again.
	if !reflect.DeepEqual(k.Intent(), full) {
		res.IncrementalOK = false
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	runtime.KeepAlive(full)
	runtime.KeepAlive(k)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.PeakRSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	return res, nil
}

func countJobs(in fabric.Input) int {
	jobs := map[[2]string]bool{}
	for _, a := range in.Allocations {
		if a.JobID != "" {
			jobs[[2]string{a.Tenant, a.JobID}] = true
		}
	}
	return len(jobs)
}
