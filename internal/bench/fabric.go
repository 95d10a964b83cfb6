package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
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
	// (default 5); Starts how many single job starts are timed (default
	// 101); Revisions how many fabric-loop revisions (default 10: 5 job
	// starts and their stops; -1: none).
	Runs, Starts, Revisions int
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
	// CompileCPUMs and VerifyCPUMs are the process's CPU time (user and
	// system, every thread: the garbage collector's too) over the same
	// runs: on a machine shared with other work, wall time stretches with
	// the load, CPU time much less.
	CompileCPUMs Spread  `json:"compileCpuMs"`
	VerifyCPUMs  Spread  `json:"verifyCpuMs"`
	FullMs       Spread  `json:"fullMs"` // compile + verify
	VerifyOK     bool    `json:"verifyOk"`
	NewCompiler  float64 `json:"newCompilerMs"` // building the incremental compiler, once
	Starts       int     `json:"starts"`
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
	IncrementalOK bool `json:"incrementalOk"`
	// Loop is the fabric loop's work per revision, as the server does it.
	Loop       *LoopResult `json:"loop,omitempty"`
	PeakRSSMiB float64     `json:"peakRssMiB"`
	HeapMiB    float64     `json:"heapMiB"` // live heap after the run (intent, compiler, verifier inputs)
}

// LoopResult is the fabric loop's work per revision (a job start or stop),
// done the way the server's fabricOnce does it: the incremental compile,
// rendering the devices it changed (the others' files are kept), the
// config hashes of every device that say which to deploy, the verifier,
// and the deploy (lint, then the file driver writing and syncing each
// device's files; at most 8 at a time). The state machine's commit of the
// revision (a raft round) is not in it.
type LoopResult struct {
	Revisions int    `json:"revisions"`
	CompileMs Spread `json:"compileMs"` // Compiler.Apply
	RenderMs  Spread `json:"renderMs"`  // the changed devices, and every device's hash
	VerifyMs  Spread `json:"verifyMs"`
	DeployMs  Spread `json:"deployMs"` // the changed devices
	TotalMs   Spread `json:"totalMs"`
	// Devices is the median number of devices a revision deployed.
	Devices int `json:"devices"`
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

// cpuMs is the CPU time the process used so far (user and system), in ms.
func cpuMs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

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
	if o.Revisions == 0 {
		o.Revisions = 10
	}
	if o.Runs < 1 || o.Runs > 1000 {
		return nil, domain.Invalid("runs", "runs %d must be between 1 and 1000", o.Runs)
	}
	if o.Revisions < -1 || o.Revisions > 1000 {
		return nil, domain.Invalid("revisions", "revisions %d must be between 1 and 1000, or -1 for none", o.Revisions)
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

	var compileMs, verifyMs, fullMs, compileCPU, verifyCPU []float64
	var full *fabric.Intent
	for range o.Runs {
		runtime.GC() // each run starts from the same heap, not the last run's garbage
		c0 := cpuMs()
		t0 := time.Now()
		it, err := fabric.Compile(in)
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		c1 := cpuMs()
		r := verify.Verify(in, it)
		compileMs = append(compileMs, float64(t1.Sub(t0).Nanoseconds())/1e6)
		verifyMs = append(verifyMs, msSince(t1))
		fullMs = append(fullMs, msSince(t0))
		compileCPU, verifyCPU = append(compileCPU, c1-c0), append(verifyCPU, cpuMs()-c1)
		if !r.OK() {
			res.VerifyOK = false
		}
		res.Ports, res.VRFs = r.Stats.Endpoints, r.Stats.VRFs
		full = it
	}
	res.CompileMs, res.VerifyMs, res.FullMs = spread(compileMs), spread(verifyMs), spread(fullMs)
	res.CompileCPUMs, res.VerifyCPUMs = spread(compileCPU), spread(verifyCPU)

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
	jobs := make([]benchJob, o.Starts)
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
		jobs[i] = benchJob{start: start, stop: fabrictest.StopJob(start), tenant: tenant.Name}
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
	if o.Revisions > 0 {
		loop, err := fabricLoop(k, in, jobs[:min(len(jobs), (o.Revisions+1)/2)])
		if err != nil {
			return nil, err
		}
		res.Loop = loop
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

// benchJob is one job start and the stop that undoes it.
type benchJob struct {
	next        fabric.Input
	start, stop fabric.Change
	tenant      string
}

// fabricLoop runs each job's start and then its stop as a fabric-loop
// revision (LoopResult) on k, whose intent is the compile of in, deploying
// to a file driver in a temporary directory.
func fabricLoop(k *fabric.Compiler, in fabric.Input, jobs []benchJob) (*LoopResult, error) {
	dir, err := os.MkdirTemp("", "jobfabric-bench-fabric-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	l := &loop{drv: &deploy.Checked{Driver: &deploy.File{Dir: dir, Keep: 1}}, switches: map[string]*domain.Switch{},
		files: map[string]render.DeviceFiles{}, sums: map[string]string{}, deployed: map[string]string{}}
	for _, site := range in.Topology.Sites {
		for fi := range site.Fabrics {
			f := &site.Fabrics[fi]
			for _, sws := range [][]domain.Switch{f.SuperSpines, f.Spines, f.Leaves} {
				for i := range sws {
					l.switches[sws[i].Name] = &sws[i]
				}
			}
		}
	}
	// The devices as deployed: everything, once, untimed (the first
	// deploy of a fabric, not a revision).
	all := make([]*fabric.Device, len(k.Intent().Devices))
	for i := range all {
		all[i] = &k.Intent().Devices[i]
	}
	if _, _, err := l.revision(k.Intent(), all, in); err != nil {
		return nil, err
	}
	var compile, rend, ver, dep, total []float64
	var devices []int
	for _, j := range jobs {
		for _, ch := range []fabric.Change{j.start, j.stop} {
			runtime.GC()
			t0 := time.Now()
			changed, err := k.Apply(ch)
			if err != nil {
				return nil, err
			}
			compile = append(compile, msSince(t0))
			times, n, err := l.revision(k.Intent(), changed, k.Input())
			if err != nil {
				return nil, err
			}
			rend, ver, dep = append(rend, times[0]), append(ver, times[1]), append(dep, times[2])
			total = append(total, msSince(t0))
			devices = append(devices, n)
		}
	}
	slices.Sort(devices)
	return &LoopResult{Revisions: len(total), CompileMs: spread(compile), RenderMs: spread(rend), VerifyMs: spread(ver),
		DeployMs: spread(dep), TotalMs: spread(total), Devices: devices[len(devices)/2]}, nil
}

// loop is what the fabric loop keeps between revisions: the rendered
// files of every device and the hash each device runs.
type loop struct {
	drv      *deploy.Checked
	switches map[string]*domain.Switch
	files    map[string]render.DeviceFiles
	sums     map[string]string // each device's files' hash, until rendered again
	deployed map[string]string
}

// revision renders the devices the compile changed (the server keeps the
// others' files and hashes), hashes the files rendered, verifies it against in,
// and deploys the devices whose hash is not the deployed one. times are
// render (with the hashes), verify and deploy in ms; n is the devices
// deployed.
func (l *loop) revision(it *fabric.Intent, changed []*fabric.Device, in fabric.Input) (times [3]float64, n int, err error) {
	t := time.Now()
	for _, d := range changed {
		files, err := render.Options{}.Render(d, "")
		if err != nil {
			return times, 0, err
		}
		l.files[d.Name] = render.DeviceFiles{Device: d.Name, NOS: d.NOS, Files: files}
		delete(l.sums, d.Name)
	}
	var todo []deploy.Device
	for i := range it.Devices {
		df := l.files[it.Devices[i].Name]
		// As the server: a device's hash is kept until it is rendered
		// again.
		sum, ok := l.sums[df.Device]
		if !ok {
			h := sha256.New()
			h.Write([]byte(df.NOS))
			for _, f := range df.Files {
				h.Write([]byte("\x00" + f.Name + "\x00"))
				h.Write([]byte(f.Content))
			}
			sum = hex.EncodeToString(h.Sum(nil)[:8])
			l.sums[df.Device] = sum
		}
		if l.deployed[df.Device] != sum {
			todo = append(todo, deploy.Device{Name: df.Device, NOS: df.NOS, Hash: sum, Files: df.Files, Switch: l.switches[df.Device]})
		}
	}
	times[0] = msSince(t)
	t = time.Now()
	if r := verify.Verify(in, it); !r.OK() {
		return times, 0, fmt.Errorf("fabric loop: the verifier fails: %s", r.Text(3))
	}
	times[1] = msSince(t)
	t = time.Now()
	errs := make([]error, len(todo))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, d := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = l.drv.ApplyConditions(context.Background(), d)
		}()
	}
	wg.Wait()
	for i, d := range todo {
		if errs[i] != nil {
			return times, 0, fmt.Errorf("deploy %s: %w", d.Name, errs[i])
		}
		l.deployed[d.Name] = d.Hash
	}
	times[2] = msSince(t)
	return times, len(todo), nil
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
