package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// Node is one server of an openb node list.
type Node struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	Model     string
}

// Pod is one row of an openb pod list.
type Pod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int    // num_gpu
	Milli     int    // gpu_milli of each GPU (0 for CPU-only pods)
	Spec      string // gpu_spec: "A|B", empty for any model
}

// TotalMilli is the milli-GPU the pod asks for.
func (p *Pod) TotalMilli() int64 { return int64(p.GPUs) * int64(p.Milli) }

// ReadNodes reads an openb node list (sn, cpu_milli, memory_mib, gpu,
// model). Servers without GPUs are left out: the openb protocol's cluster
// is the GPU servers.
func ReadNodes(name string, r io.Reader) ([]Node, error) {
	t, err := readTable(name, r, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	var out []Node
	seen := map[string]bool{}
	for i := range t.rows {
		n := Node{Name: t.str(i, "sn"), Model: t.str(i, "model")}
		if n.Name == "" {
			return nil, bad(fmt.Sprintf("%s[line %d].sn", name, t.line[i]), "required", "%s line %d: sn is empty", name, t.line[i])
		}
		if seen[n.Name] {
			return nil, bad(fmt.Sprintf("%s[line %d].sn", name, t.line[i]), "unique", "%s line %d: node %s is listed twice", name, t.line[i], n.Name)
		}
		seen[n.Name] = true
		if n.CPUMilli, err = t.int64(i, "cpu_milli", 0, domain.MaxCPUMilli); err != nil {
			return nil, err
		}
		if n.MemoryMiB, err = t.int64(i, "memory_mib", 0, domain.MaxMemoryMiB); err != nil {
			return nil, err
		}
		g, err := t.int64(i, "gpu", 0, 16)
		if err != nil {
			return nil, err
		}
		n.GPUs = int(g)
		if n.GPUs == 0 {
			continue
		}
		if n.Model == "" || n.Model == "nan" {
			return nil, bad(fmt.Sprintf("%s[line %d].model", name, t.line[i]), "required", "%s line %d: node %s has %d GPUs and no model", name, t.line[i], n.Name, n.GPUs)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, bad(name, "gpu-nodes", "%s lists no server with GPUs", name)
	}
	return out, nil
}

// ReadPods reads an openb pod list (name, cpu_milli, memory_mib, num_gpu,
// gpu_milli, and gpu_spec when present; other columns are ignored: pods
// only arrive).
func ReadPods(name string, r io.Reader) ([]Pod, error) {
	t, err := readTable(name, r, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return nil, err
	}
	out := make([]Pod, 0, len(t.rows))
	seen := map[string]bool{}
	for i := range t.rows {
		at := fmt.Sprintf("%s[line %d]", name, t.line[i])
		p := Pod{Name: t.str(i, "name"), Spec: t.str(i, "gpu_spec")}
		if p.Spec == "nan" {
			p.Spec = ""
		}
		if p.Name == "" {
			return nil, bad(at+".name", "required", "%s: name is empty", at)
		}
		if seen[p.Name] {
			return nil, bad(at+".name", "unique", "%s: pod %s is listed twice", at, p.Name)
		}
		seen[p.Name] = true
		if p.CPUMilli, err = t.int64(i, "cpu_milli", 0, domain.MaxCPUMilli); err != nil {
			return nil, err
		}
		if p.MemoryMiB, err = t.int64(i, "memory_mib", 0, domain.MaxMemoryMiB); err != nil {
			return nil, err
		}
		g, err := t.int64(i, "num_gpu", 0, 16)
		if err != nil {
			return nil, err
		}
		m, err := t.int64(i, "gpu_milli", 0, 1000)
		if err != nil {
			return nil, err
		}
		p.GPUs, p.Milli = int(g), int(m)
		switch {
		case p.GPUs == 0:
			p.Milli = 0
			if p.CPUMilli == 0 {
				return nil, bad(at+".cpu_milli", "cpu-only", "%s: pod %s asks for no GPU and no CPU", at, p.Name)
			}
		case p.Milli == 0:
			return nil, bad(at+".gpu_milli", "gpu-milli", "%s: pod %s asks for %d GPUs of 0 milli-GPU", at, p.Name, p.GPUs)
		case p.GPUs > 1 && p.Milli < 1000:
			return nil, bad(at+".gpu_milli", "gpu-share", "%s: pod %s shares %d GPUs (gpu_milli %d); only a single-GPU pod may take a fraction", at, p.Name, p.GPUs, p.Milli)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, bad(name, "pods", "%s lists no pod", name)
	}
	return out, nil
}

// Policies are the placement policies of `sim openb`, by name, with the
// labels of the FGD paper's result files.
var Policies = []struct{ Name, Label string }{
	{"random", "01-Random"}, {"dotprod", "02-DotProd"}, {"gpuclustering", "03-GpuClustering"},
	{"gpupacking", "04-GpuPacking"}, {"bestfit", "05-BestFit"}, {"fgd", "06-FGD"}, {"jobfabric", "07-JobFabric"},
}

// PolicyLabel is the result-file label of a policy ("" if unknown).
func PolicyLabel(name string) string {
	for _, p := range Policies {
		if p.Name == name {
			return p.Label
		}
	}
	return ""
}

// CheckPolicy rejects an unknown policy name.
func CheckPolicy(name string) error {
	if PolicyLabel(name) == "" {
		var names []string
		for _, p := range Policies {
			names = append(names, p.Name)
		}
		return bad("policy", "policy-name", "policy %q is not one of %s", name, strings.Join(names, ", "))
	}
	return nil
}

// typicalShapes are the most frequent pod shapes of the original trace,
// by decreasing frequency until they cover at least 95 % of the pods,
// renormalised to sum to 1 (the FGD paper's "typical pods"; without
// memory, which FGD ignores).
func typicalShapes(pods []Pod) []sched.Shape {

	type key struct {
		cpu         int64
		milli, gpus int
		spec        string
	}
	count := map[key]int{}
	for _, p := range pods {
		cpu := p.CPUMilli
		if cpu == 0 {
			cpu = 100 // Kubernetes' non-zero default request, as the paper's simulator counts it
		}
		count[key{cpu: cpu, milli: p.Milli, gpus: p.GPUs, spec: p.Spec}]++
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		x, y := keys[a], keys[b]
		if count[x] != count[y] {
			return count[x] > count[y]
		}
		if x.cpu != y.cpu {
			return x.cpu > y.cpu
		}
		if x.milli != y.milli {
			return x.milli > y.milli
		}
		if x.gpus != y.gpus {
			return x.gpus > y.gpus
		}
		return x.spec > y.spec
	})
	// The arithmetic is the paper's simulator's, to the last bit: each
	// share is count/total, renormalised by cum/total (FGD truncates its
	// ratings, so the last bit can move a pod).
	total := float64(len(pods))
	expected := 95 * total / 100
	var cum float64
	n := 0
	for cum < expected && n < len(keys) {
		cum += float64(count[keys[n]])
		n++
	}
	out := make([]sched.Shape, n)
	for i, k := range keys[:n] {
		out[i] = sched.Shape{CPUMilli: k.cpu, GPUs: k.gpus, Milli: k.milli, Models: sched.ParseModels(k.spec), Freq: float64(count[k]) / total / (cum / total)}
	}
	return out
}

// OpenbRun configures one openb run.
type OpenbRun struct {
	Workload string // the pod file's name, e.g. openb_pod_list_default
	Nodes    []Node
	Pods     []Pod // the original trace, in any order
	Policy   string
	Seed     int64
	Tune     float64 // demand target as a multiple of GPU capacity (1.3); 0: no tuning
	// Replicate multiplies the cluster and the trace (speed runs at 10x).
	Replicate int
}

// OpenbResult is one run's outcome.
type OpenbResult struct {
	Workload  string  `json:"workload"`
	Policy    string  `json:"policy"`
	Label     string  `json:"label"`
	Tune      float64 `json:"tune"`
	Seed      int64   `json:"seed"`
	Nodes     int     `json:"nodes"`
	TotalGPUs int     `json:"totalGPUs"`
	Pods      int     `json:"pods"`
	Appended  int     `json:"appended"` // resampled pods added by tuning (negative: removed)
	Placed    int     `json:"placed"`
	Failed    int     `json:"failed"`
	// Alloc[x] is the mean allocation % of milli-GPU over the pod arrivals
	// at arrived demand x % (NaN when none is near).
	Alloc [131]float64 `json:"-"`
	// FinalAlloc is allocation % at the end; FragRatio the share of idle
	// GPU capacity that is fragmented for the trace's typical pods then.
	FinalAlloc float64 `json:"finalAlloc"`
	FragRatio  float64 `json:"fragRatio"`
	// Seconds is the time spent deciding and committing placements.
	Seconds         float64 `json:"seconds"`
	DecisionsPerSec float64 `json:"decisionsPerSecond"`
	// Sizes counts arrivals and placements by pod size (SizeOf).
	Sizes map[string]*SizeCount `json:"sizes"`
}

// SizeCount is how pods of one size fared in a run.
type SizeCount struct {
	Arrived int `json:"arrived"`
	Placed  int `json:"placed"`
	// FirstFail is the arrived demand (% of GPU capacity) when the first
	// pod of this size was turned away; -1 if none was.
	FirstFail float64 `json:"firstFail"`
}

// SizeOf names a pod's size: "cpu" (no GPU), "share" (part of one GPU),
// else its number of whole GPUs ("1", "2", "4", "8").
func SizeOf(p *Pod) string {
	switch {
	case p.GPUs == 0:
		return "cpu"
	case p.Milli < 1000:
		return "share"
	}
	return strconv.Itoa(p.GPUs)
}

// scorer builds the policy's scorer for the trace.
func scorer(policy string, pods []Pod, rng *rand.Rand) (sched.Scorer, error) {
	switch policy {
	case "random":
		return sched.Random{Rand: rng}, nil
	case "dotprod":
		return sched.DotProd{}, nil
	case "gpuclustering":
		return sched.GpuClustering{}, nil
	case "gpupacking":
		return sched.GpuPacking{}, nil
	case "bestfit":
		return sched.BestFit{}, nil
	case "fgd":
		return &sched.FGD{Shapes: typicalShapes(pods)}, nil
	case "jobfabric":
		// The scheduler's own workload: every shape of the trace (the
		// scheduler counts them from its jobs the same way).
		jobs := make([]*domain.Job, len(pods))
		for i := range pods {
			jobs[i] = jobOf(uint64(i+1), &pods[i])
		}
		return sched.NewJobFabric(sched.ShapesOf(jobs)), nil
	}
	return nil, CheckPolicy(policy)
}

// order is the protocol's arrival order: every original pod sorted by name
// and shuffled with the seed, then resampled pods appended (or random pods
// removed) until demand meets tune x capacity. It also draws the seeded
// node-name prefixes that break score ties. The calls on the generator
// follow the paper's simulator: one draw at seeding, the shuffle, the
// tuning draws, informerDraws draws, then the node permutation.
func order(orig []Pod, nodes []Node, tune float64, rng *rand.Rand) (pods []Pod, appended int, prefixed []Node) {
	rng.Int()
	sorted := append([]Pod(nil), orig...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Name < sorted[b].Name })
	pods = append([]Pod(nil), sorted...)
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	var capacity, total int64
	for _, n := range nodes {
		capacity += int64(n.GPUs) * 1000
	}
	for i := range pods {
		total += pods[i].TotalMilli()
	}
	target := tune * float64(capacity)
	switch {
	case tune <= 0 || float64(total) == target:
	case float64(total) > target:
		for float64(total) > target && len(pods) > 0 {
			i := rng.Intn(len(pods))
			total -= pods[i].TotalMilli()
			pods = append(pods[:i], pods[i+1:]...)
			appended--
		}
	default:
		for k := 0; ; k++ {
			p := sorted[rng.Intn(len(sorted))]
			if float64(total+int64(p.Milli)) > target {
				break
			}
			total += p.TotalMilli()
			p.Name = fmt.Sprintf("%s-tuned-%d", p.Name, k)
			pods = append(pods, p)
			appended++
		}
	}
	for range informerDraws {
		rng.Int63()
	}
	prefixed = append([]Node(nil), nodes...)
	sort.Slice(prefixed, func(a, b int) bool { return prefixed[a].Name < prefixed[b].Name })
	perm := rng.Perm(len(prefixed))
	for i := range prefixed {
		prefixed[i].Name = fmt.Sprintf("%04d-%s", perm[i], prefixed[i].Name)
	}
	sort.Slice(prefixed, func(a, b int) bool { return prefixed[a].Name < prefixed[b].Name })
	return pods, appended, prefixed
}

// informerDraws is how many numbers the paper's simulator takes from its
// seeded generator between tuning the workload and naming the nodes: it
// starts kube-scheduler's informers there, and each one's reflector draws
// a random watch timeout (client-go: rand.Float64, one Int63) from the same
// process-wide generator before the first node is created. The count is
// measured, not read from kube-scheduler: of 0..20 extra draws only 10
// reproduces the published runs (every BestFit, FGD, DotProd, GpuClustering
// and GpuPacking row, all seeds, every column; docs/benchmarks.md); any
// other count renames the nodes, and so changes every tie-break.
const informerDraws = 10

// topologyOf is the openb cluster as a jobfabric topology: one fabric, the
// servers in tie-break order.
func topologyOf(nodes []Node) *domain.Topology {
	f := domain.Fabric{Name: "openb"}
	for _, n := range nodes {
		f.Servers = append(f.Servers, domain.Server{Name: n.Name, GPUModel: n.Model, GPUs: n.GPUs, CPUMilli: n.CPUMilli, MemoryMiB: n.MemoryMiB})
	}
	return &domain.Topology{Sites: []domain.Site{{Name: "sim", Fabrics: []domain.Fabric{f}}}}
}

// jobOf is a pod as a jobfabric job.
func jobOf(id uint64, p *Pod) *domain.Job {
	j := &domain.Job{ID: id, State: domain.JobPending}
	j.Tenant, j.Workspace, j.Name = "openb", "default", p.Name
	j.CPUMilli, j.MemoryMiB = p.CPUMilli, p.MemoryMiB
	j.GPUModels = sched.ParseModels(p.Spec)
	switch {
	case p.GPUs == 1 && p.Milli < 1000:
		j.Share = float64(p.Milli) / 1000
	case p.GPUs > 0:
		j.GPUs = p.GPUs
	}
	return j
}

// RunOpenb runs one openb replay: the protocol's arrival order, then each
// pod placed (or failed, never retried) by the real scheduler's placement
// code with the policy's scorer before the next arrives.
func RunOpenb(o OpenbRun, progress func(done, total int)) (*OpenbResult, error) {
	if err := CheckPolicy(o.Policy); err != nil {
		return nil, err
	}
	if len(o.Nodes) == 0 || len(o.Pods) == 0 {
		return nil, bad("pods", "required", "an openb run needs nodes and pods")
	}
	nodes, orig := o.Nodes, o.Pods
	if o.Replicate > 1 {
		nodes, orig = replicate(o.Nodes, o.Pods, o.Replicate)
	}
	rng := rand.New(rand.NewSource(o.Seed))
	pods, appended, prefixed := order(orig, nodes, o.Tune, rng)
	sc, err := scorer(o.Policy, orig, rng)
	if err != nil {
		return nil, err
	}

	capacity := int64(0)
	for _, n := range prefixed {
		capacity += int64(n.GPUs) * 1000
	}
	res := &OpenbResult{Workload: o.Workload, Policy: o.Policy, Label: PolicyLabel(o.Policy), Tune: o.Tune, Seed: o.Seed,
		Nodes: len(prefixed), TotalGPUs: int(capacity / 1000), Pods: len(pods), Appended: appended}
	pl := sched.NewPlacer(&sched.Snapshot{Topology: topologyOf(prefixed), Scorer: sc})
	arrived := make([]int64, len(pods))
	used := make([]int64, len(pods))
	var a, u int64
	res.Sizes = map[string]*SizeCount{}
	start := time.Now()
	for i := range pods {
		p := &pods[i]
		j := jobOf(uint64(i+1), p)
		a += p.TotalMilli()
		sz := res.Sizes[SizeOf(p)]
		if sz == nil {
			sz = &SizeCount{FirstFail: -1}
			res.Sizes[SizeOf(p)] = sz
		}
		sz.Arrived++
		if got, _ := pl.Place(j); got != nil {
			u += p.TotalMilli()
			res.Placed++
			sz.Placed++
		} else {
			res.Failed++
			if sz.FirstFail < 0 {
				sz.FirstFail = 100 * float64(a) / float64(capacity)
			}
		}
		arrived[i], used[i] = a, u
		if progress != nil && (i+1)%2000 == 0 {
			progress(i+1, len(pods))
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.DecisionsPerSec = float64(len(pods)) / res.Seconds
	}
	res.Alloc = columns(arrived, used, res.TotalGPUs)
	res.FinalAlloc = 100 * float64(u) / float64(capacity)
	shapes := typicalShapes(orig)
	var fragSum, idle float64
	pl.Hosts("openb", func(h *sched.Host) {
		fragSum += sched.Fragmentation(shapes, h)
		idle += float64(h.FreeMilli())
	})
	if idle > 0 {
		res.FragRatio = 100 * fragSum / idle
	}
	return res, nil
}

// replicate copies the cluster and the trace k times (names suffixed).
func replicate(nodes []Node, pods []Pod, k int) ([]Node, []Pod) {
	var ns []Node
	var ps []Pod
	for c := 0; c < k; c++ {
		for _, n := range nodes {
			n.Name = fmt.Sprintf("%s-r%d", n.Name, c)
			ns = append(ns, n)
		}
		for _, p := range pods {
			p.Name = fmt.Sprintf("%s-r%d", p.Name, c)
			ps = append(ps, p)
		}
	}
	return ns, ps
}

// pyRound rounds to d decimals as Python's round does on a float: to the
// nearest multiple of 10^-d of its exact binary value, ties to even. The
// published analysis rounded each arrival's allocation so.
func pyRound(x float64, d int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', d, 64), 64)
	return v
}

// npRound rounds as numpy does (round() on the numpy float a pandas mean
// returns): scale by 10^d, round half to even, scale back. It differs from
// pyRound where the scaling is inexact: 51.945 (the float just above)
// becomes 5194.499999999999 and rounds to 51.94.
func npRound(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.RoundToEven(x*p) / p
}

// pairwiseSum adds xs the way numpy's sum does (pandas' mean): eight
// accumulators over blocks of up to 128, halves above that. Floating-point
// addition is not associative, and a mean that lands on a rounding tie
// must be the same float the published analysis computed.
func pairwiseSum(xs []float64) float64 {
	n := len(xs)
	switch {
	case n < 8:
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s
	case n <= 128:
		var r [8]float64
		copy(r[:], xs[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for k := range r {
				r[k] += xs[i+k]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += xs[i]
		}
		return s
	}
	h := n / 2
	h -= h % 8
	return pairwiseSum(xs[:h]) + pairwiseSum(xs[h:])
}

// columns turns per-arrival (arrived, used) milli-GPU into the paper's
// discrete curve: column x is the mean allocation % over the arrivals
// whose arrived demand rounds to x % (else over x-1..x+1), to 2 decimals,
// computed with the published analysis' arithmetic (pandas: Python's round
// per arrival, numpy's sum and round for the mean).
func columns(arrived, used []int64, totalGPUs int) [131]float64 {
	var out [131]float64
	arr := make([]int, len(arrived))
	alloc := make([]float64, len(arrived))
	for i := range arrived {
		arr[i] = int(pyRound(float64(arrived[i])/float64(totalGPUs)/10, 0))
		alloc[i] = pyRound(float64(used[i])/float64(totalGPUs)/10, 2)
	}
	var sel []float64
	for x := 0; x <= 130; x++ {
		pick := func(lo, hi int) []float64 {
			sel = sel[:0]
			for i, v := range arr {
				if v >= lo && v <= hi {
					sel = append(sel, alloc[i])
				}
			}
			return sel
		}
		vs := pick(x, x)
		if len(vs) == 0 {
			vs = pick(x-1, x+1)
		}
		if len(vs) == 0 {
			out[x] = math.NaN()
			continue
		}
		out[x] = npRound(pairwiseSum(vs)/float64(len(vs)), 2)
	}
	return out
}

// WriteAllocCSV writes runs in the layout of the FGD paper's
// analysis_allo_discrete.csv.
func WriteAllocCSV(w io.Writer, runs []*OpenbResult) error {
	var b strings.Builder
	b.WriteString("workload,sc_policy,tune,seed,total_gpus")
	for x := 0; x <= 130; x++ {
		fmt.Fprintf(&b, ",%d", x)
	}
	b.WriteString("\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "%s,%s,%g,%d,%d", r.Workload, r.Label, r.Tune, r.Seed, r.TotalGPUs)
		for _, v := range r.Alloc {
			if math.IsNaN(v) {
				b.WriteString(",")
			} else {
				fmt.Fprintf(&b, ",%g", v)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
