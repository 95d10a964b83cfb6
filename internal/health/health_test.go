package health

import (
	"encoding/json"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	dt "github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// world is a domaintest.World seen as a Source, with node agents' facts.
type world struct {
	*dt.World
	hosts map[string]*domain.HostStatus
}

func (w world) Topology() *domain.Topology { return w.World.Topology }
func (w world) LiveJobs() iter.Seq[*domain.Job] {
	return slices.Values(w.World.Jobs)
}
func (w world) Host(n string) (*domain.HostStatus, bool) {
	h, ok := w.hosts[n]
	return h, ok
}

// readings is test data: a telemetry.Reader over fixed readings.
type readings map[telemetry.Key][]telemetry.Reading

func (r readings) Readings(k telemetry.Key) []telemetry.Reading { return r[k] }

// set adds a reading of sig on k at rate (counter) or value (gauge).
func (r readings) set(k telemetry.Key, sig telemetry.Signal, counter bool, v float64, stale bool) {
	rd := telemetry.Reading{Key: k, Signal: sig, Priority: -1, Counter: counter, At: dt.Now, Stale: stale}
	if counter {
		rd.Rate = v
	} else {
		rd.Value = v
	}
	r[k] = append(r[k], rd)
}

// clean gives every switch port of the topology fresh, quiet counters.
func clean(ix *Index) readings {
	r := readings{}
	for _, p := range ix.topo.ports {
		for _, k := range p.Keys {
			r.set(k, telemetry.RxBytes, true, 1e9, false)
			r.set(k, telemetry.PFCPauseRx, true, 0, false)
		}
	}
	return r
}

func port(dev, p string) telemetry.Key { return portKey(dev, p) }

// fabricWorld: 2 stripes x 2 servers x 8 GPUs, rail-optimized, 2 spines.
// Leaf sS-leafR serves rail R of stripe S; its uplinks are swp3 (spine1)
// and swp4 (spine2); spine port N faces the Nth leaf (s1-leaf0 is 1,
// s2-leaf0 is 5).
//
//	job 1 acme/train  "intra": both servers of stripe 1, all rails: one leaf per rail
//	job 2 acme/train  "cross": a server of each stripe, all rails
//	job 3 glx/sim     "rail0": GPU 0 of a server of each stripe
//	job 4 glx/sim     "single": one server
//	job 5 glx/sim     "skew": GPU 1 of s1-gpu002, GPU 2 of s2-gpu002: rails differ
func fabricWorld(t *testing.T) *dt.World {
	w := dt.NewWorld(t, dt.DGX(2, 2))
	return w.
		Running(dt.MakeJob("acme/train", 0).Name("intra"), dt.On("s1-gpu001", 0, 1, 2, 3), dt.On("s1-gpu002", 0, 1, 2, 3)).
		Running(dt.MakeJob("acme/train", 0).Name("cross"), dt.On("s1-gpu001", 4, 5, 6, 7), dt.On("s2-gpu001", 4, 5, 6, 7)).
		Running(dt.MakeJob("glx/sim", 0).Name("rail0"), dt.On("s1-gpu002", 4), dt.On("s2-gpu002", 4)).
		Running(dt.MakeJob("glx/sim", 0).Name("single"), dt.On("s2-gpu001", 0, 1, 2, 3)).
		Running(dt.MakeJob("glx/sim", 0).Name("skew"), dt.On("s1-gpu002", 5), dt.On("s2-gpu002", 6))
}

func TestCongestedUplinkIsAttributedToTheJobsCrossingIt(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	for _, c := range []struct {
		name string
		key  telemetry.Key
		want []uint64 // jobs whose verdict turns congested; the others stay healthy
	}{
		{"rail-4 uplink, leaf side", port("s1-leaf4", "swp3"), []uint64{2, 3}},
		{"rail-4 uplink, spine side", port("spine1", "swp5"), []uint64{2, 3}},
		{"rail-7 uplink", port("s2-leaf7", "swp4"), []uint64{2}},
		{"rail-0 uplink: only job 2's rails cross, job 1 is on one leaf per rail", port("s1-leaf0", "swp4"), nil},
		{"rail-5 uplink of stripe 1: the skewed job changes rails", port("s1-leaf5", "swp3"), []uint64{2, 5}},
		{"rail-6 uplink of stripe 2", port("s2-leaf6", "swp4"), []uint64{2, 5}},
		{"job 1's own leaf port", port("s1-leaf2", "swp2"), []uint64{1}},
		{"a port no job uses", port("s2-leaf3", "swp2"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !slices.ContainsFunc(ix.topo.ports, func(h Hop) bool { return slices.Contains(h.Keys, c.key) }) {
				t.Fatalf("test key %v is not a port of the topology", c.key)
			}
			r := clean(ix)
			r.set(c.key, telemetry.PFCPauseRx, true, 50000, false)
			var got []uint64
			for _, id := range ix.Jobs() {
				v, _ := ix.Judge(id, r, &th)
				switch v.Verdict {
				case domain.PathCongested:
					got = append(got, id)
					if !strings.Contains(v.Message, c.key.Device+"/"+c.key.Port) {
						t.Errorf("job %d message %q does not name %v", id, v.Message, c.key)
					}
				case domain.PathHealthy:
				default:
					t.Errorf("job %d: %s %s, want congested or healthy", id, v.Verdict, v.Message)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("congested jobs %v, want %v", got, c.want)
			}
			// The reverse index says the same of the port.
			if jobs := ix.JobsOn(c.key); !slices.Equal(jobs, c.want) {
				t.Fatalf("JobsOn(%v) = %v, want %v", c.key, jobs, c.want)
			}
		})
	}
}

func TestNonRailOptimizedJobCrossesAllItsLeavesUplinks(t *testing.T) {
	w := fabricWorld(t)
	w.Topology.Sites[0].Fabrics[0].RailOptimized = false
	ix := Build(world{World: w}, nil)
	// Job 1 spans both servers of stripe 1 on four leaves: without the
	// rail assumption its traffic may cross any of their uplinks.
	if got := ix.JobsOn(port("s1-leaf0", "swp3")); !slices.Contains(got, 1) {
		t.Fatalf("JobsOn(s1-leaf0/swp3) = %v, want job 1 in a fabric that is not rail-optimized", got)
	}
	// Job 4 is on one server: it crosses no uplink anywhere.
	for i, ids := range ix.byPort {
		if slices.Contains(ids, 4) && ix.topo.ports[i].Kind == HopUplink {
			t.Fatalf("single-server job 4 is on %v", ix.topo.ports[i].Name)
		}
	}
}

func TestStaleDataIsUnknownNotHealthy(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	// Job 2's ports and uplinks, all quiet.
	p, _ := ix.Path(2)
	fresh := readings{}
	for _, h := range p.Hops {
		if h.Kind == HopPort || h.Kind == HopUplink {
			for _, k := range h.Keys {
				fresh.set(k, telemetry.PFCPauseRx, true, 0, false)
			}
		}
	}
	if v, _ := ix.Judge(2, fresh, &th); v.Verdict != domain.PathHealthy {
		t.Fatalf("fresh quiet readings: %s %s, want healthy", v.Verdict, v.Message)
	}
	// The same readings gone stale: unknown.
	stale := readings{}
	for k, rs := range fresh {
		for _, r := range rs {
			r.Stale = true
			// A stale series keeps its last rate: it must not be judged
			// either way, even when that rate was a fault.
			r.Rate = 1e6
			stale[k] = append(stale[k], r)
		}
	}
	v, _ := ix.Judge(2, stale, &th)
	if v.Verdict != domain.PathUnknown || !strings.Contains(v.Message, "stale") {
		t.Fatalf("stale readings: %s %q, want unknown naming stale data", v.Verdict, v.Message)
	}
	// One stale NIC (a kind not required) still makes the path unknown:
	// it was monitored and went silent.
	nic := p.Hops[1]
	fresh.set(nic.Keys[0], telemetry.CNPSent, true, 0, true)
	if v, _ := ix.Judge(2, fresh, &th); v.Verdict != domain.PathUnknown {
		t.Fatalf("a stale NIC: %s, want unknown", v.Verdict)
	}
	// No data at all: unknown.
	if v, _ := ix.Judge(2, readings{}, &th); v.Verdict != domain.PathUnknown || !strings.Contains(v.Message, "no data") {
		t.Fatalf("no readings: %s %q, want unknown, no data", v.Verdict, v.Message)
	}
}

func TestVerdictOfEachSignal(t *testing.T) {
	th := DefaultThresholds()
	k := port("leaf", "swp1")
	for _, c := range []struct {
		sig     telemetry.Signal
		counter bool
		v       float64
		want    domain.PathVerdict
	}{
		{telemetry.PFCPauseRx, true, 1000, domain.PathHealthy}, // at the threshold: not above
		{telemetry.PFCPauseTx, true, 1001, domain.PathCongested},
		{telemetry.PFCStorm, true, 0.1, domain.PathCongested},
		{telemetry.ECNMarked, true, 5000, domain.PathCongested},
		{telemetry.CNPHandled, true, 5000, domain.PathCongested},
		{telemetry.Drops, true, 2, domain.PathLossy},
		{telemetry.Drops, true, 0.5, domain.PathHealthy},
		{telemetry.CRCErrors, true, 0.01, domain.PathLinkErrors},
		{telemetry.FECUncorrected, true, 0.01, domain.PathLinkErrors},
		{telemetry.LinkFlaps, true, 0.02, domain.PathLinkErrors},
		{telemetry.LinkDown, false, 1, domain.PathLinkErrors},
		{telemetry.LinkDown, false, 0, domain.PathHealthy},
		{telemetry.OpticsRxPower, false, -14, domain.PathLinkErrors},
		{telemetry.OpticsRxPower, false, -2, domain.PathHealthy},
		{telemetry.OpticsTemp, false, 80, domain.PathLinkErrors},
		{telemetry.GPUXid, false, 79, domain.PathGPUErrors},
		{telemetry.GPUXid, false, 0, domain.PathHealthy},
		{telemetry.GPUNVLinkErr, true, 1, domain.PathGPUErrors},
		{telemetry.GPUECCErr, true, 1, domain.PathGPUErrors},
		{telemetry.GPUThrottle, false, 0x40, domain.PathGPUErrors}, // HW thermal
		{telemetry.GPUThrottle, false, 0x1, domain.PathHealthy},    // idle
		{telemetry.RxBytes, true, 1e12, domain.PathHealthy},        // load is not a fault by default
	} {
		r := readings{}
		r.set(k, c.sig, c.counter, c.v, false)
		h := Hop{Kind: HopPort, Name: "leaf/swp1", Keys: []telemetry.Key{k}, port: -1}
		if got := th.judgeHop(&h, r).verdict; got != c.want {
			t.Errorf("%s = %g: %s, want %s", c.sig, c.v, got, c.want)
		}
	}
	// With loadBytesPerSec set, a port busier than it is congested.
	load := th
	load.LoadBytesPerSec = 45e9
	for _, c := range []struct {
		sig  telemetry.Signal
		v    float64
		want domain.PathVerdict
	}{
		{telemetry.RxBytes, 44e9, domain.PathHealthy},
		{telemetry.TxBytes, 46e9, domain.PathCongested},
		{telemetry.RxBytes, 50e9, domain.PathCongested},
	} {
		r := readings{}
		r.set(k, c.sig, true, c.v, false)
		h := Hop{Kind: HopPort, Name: "leaf/swp1", Keys: []telemetry.Key{k}, port: -1}
		if got := load.judgeHop(&h, r).verdict; got != c.want {
			t.Errorf("loadBytesPerSec 45e9, %s = %g: %s, want %s", c.sig, c.v, got, c.want)
		}
	}
	// The worst verdict wins: link errors over congestion.
	r := readings{}
	r.set(k, telemetry.PFCPauseRx, true, 1e6, false)
	r.set(k, telemetry.CRCErrors, true, 1, false)
	h := Hop{Kind: HopPort, Name: "leaf/swp1", Keys: []telemetry.Key{k}}
	if res := th.judgeHop(&h, r); res.verdict != domain.PathLinkErrors || len(res.findings) != 2 {
		t.Fatalf("mixed: %+v, want link_errors first of two findings", res)
	}
}

func TestThresholdsValidate(t *testing.T) {
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mut := range map[string]func(*Thresholds){
		"dropsPerSec":    func(t *Thresholds) { t.DropsPerSec = -1 },
		"opticsTempMaxC": func(t *Thresholds) { t.OpticsTempMaxC = 0 },
		"require[0]":     func(t *Thresholds) { t.Require = []string{"spine"} },
	} {
		th := DefaultThresholds()
		mut(&th)
		err := th.Validate()
		var de *domain.Error
		if err == nil || !asErr(err, &de) || de.Field != field {
			t.Errorf("%s: %v, want an invalid %s", field, err, field)
		}
	}
}

func asErr(err error, de **domain.Error) bool {
	d, ok := err.(*domain.Error)
	*de = d
	return ok
}

// The attacker's side: tenant glx asks about its own job, which shares a
// hot uplink with acme's job 2; then for the hotspots.
func TestTenantSeesNoOtherTenantsNames(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	r := clean(ix)
	r.set(port("s1-leaf4", "swp3"), telemetry.PFCPauseRx, true, 50000, false) // jobs 2 (acme) and 3 (glx)
	r.set(port("s1-leaf2", "swp2"), telemetry.Drops, true, 500, false)        // job 1 (acme) only
	glx := func(tenant, _ string) bool { return tenant == "glx" }
	secrets := []string{"acme", "train", "intra", "cross"}

	h, ok := ix.JobHealth(3, r, &th, glx, dt.Now)
	if !ok || h.Verdict != domain.PathCongested {
		t.Fatalf("job 3 health %+v, want congested", h)
	}
	if len(h.Shared) != 1 || h.Shared[0].OtherJobs != 1 || len(h.Shared[0].Jobs) != 0 {
		t.Fatalf("job 3 shared %+v, want the hot uplink with one other job, unnamed", h.Shared)
	}
	noSecrets(t, "job 3 health as glx", h, secrets)

	// The admin sees the name.
	h, _ = ix.JobHealth(3, r, &th, All, dt.Now)
	if len(h.Shared) != 1 || len(h.Shared[0].Jobs) != 1 || h.Shared[0].Jobs[0].Name != "cross" || h.Shared[0].OtherJobs != 0 {
		t.Fatalf("job 3 shared as admin %+v, want job 2 named", h.Shared)
	}

	// Hotspots: the admin sees both hot ports; glx only the uplink on its
	// own path, with acme's job counted, never named.
	all := ix.Hotspots(r, &th, All, false, 0, dt.Now)
	if len(all.Ports) != 2 || all.Ports[0].Verdict != domain.PathLossy {
		t.Fatalf("admin hotspots %+v, want 2 ports, the lossy one first", all.Ports)
	}
	mine := ix.Hotspots(r, &th, glx, true, 0, dt.Now)
	if len(mine.Ports) != 1 || mine.Ports[0].Port != "s1-leaf4/swp3-spine1/swp5" || mine.Ports[0].OtherJobs != 1 ||
		len(mine.Ports[0].Jobs) != 1 || mine.Ports[0].Jobs[0].ID != 3 || !slices.Equal(mine.Ports[0].Tenants, []string{"glx"}) {
		t.Fatalf("glx hotspots %+v, want its uplink only, job 3 named, one other job", mine.Ports)
	}
	noSecrets(t, "hotspots as glx", mine, secrets)
}

func noSecrets(t *testing.T, what string, v any, secrets []string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			t.Fatalf("%s leaks %q: %s", what, s, b)
		}
	}
}

func TestBuildReusesUnchangedPaths(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	p1, _ := ix.Path(1)
	w.With(2, func(j *domain.Job) { j.Placement = []domain.Placement{dt.On("s2-gpu002", 0)} })
	ix2 := Build(world{World: w}, ix)
	if q, _ := ix2.Path(1); q != p1 {
		t.Fatal("job 1's unchanged path was rebuilt")
	}
	if slices.Contains(ix2.JobsOn(port("s1-leaf4", "swp3")), 2) {
		t.Fatal("job 2 moved to one server but is still on its old uplink")
	}
	w.With(1, func(j *domain.Job) { j.State = domain.JobSucceeded })
	if _, ok := Build(world{World: w}, ix2).Path(1); ok {
		t.Fatal("an ended job keeps a path")
	}
}

func TestDebounce(t *testing.T) {
	tr := NewTracker(DefaultDebounce())
	at := func(s int) time.Time { return dt.Now.Add(time.Duration(s) * time.Second) }
	var committed *domain.PathHealth
	round := uint64(0)
	step := func(s int, v domain.PathVerdict) bool {
		round++
		h, ok := tr.Observe(1, committed, Verdict{Verdict: v, Message: string(v)}, at(s), round)
		if ok {
			committed = &h
		}
		return ok
	}
	if !step(0, domain.PathHealthy) {
		t.Fatal("a first healthy verdict waits")
	}
	if !step(1, domain.PathCongested) || committed.Verdict != domain.PathCongested || !committed.Since.Equal(at(1)) {
		t.Fatalf("congestion not raised at once: %+v", committed)
	}
	// Flapping: healthy for less than Settle, then congested again: no
	// recovery is committed.
	for s := 2; s < 60; s += 2 {
		if step(s, domain.PathHealthy) || step(s+1, domain.PathCongested) {
			t.Fatalf("flapping at %ds committed %+v", s, committed)
		}
	}
	if step(60, domain.PathHealthy) || step(89, domain.PathHealthy) {
		t.Fatal("recovery committed before it held 30s")
	}
	if !step(90, domain.PathHealthy) || committed.Verdict != domain.PathHealthy || !committed.Since.Equal(at(60)) {
		t.Fatalf("recovery after 30s: %+v", committed)
	}
	// Unknown waits like a recovery.
	if step(91, domain.PathUnknown) || !step(121, domain.PathUnknown) {
		t.Fatal("unknown not settled after 30s")
	}
	tr.Sweep(round + 1)
	if len(tr.jobs) != 0 {
		t.Fatal("sweep kept a job no round saw")
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte("thresholds:\n  pfcPausePerSec: 5000\n  require: [port, nic]\ndebounce:\n  settle: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Thresholds.PFCPausePerSec, want.Thresholds.Require, want.Debounce.Settle = 5000, []string{"port", "nic"}, 10*time.Second
	if cfg.Thresholds.PFCPausePerSec != 5000 || !slices.Equal(cfg.Thresholds.Require, want.Thresholds.Require) ||
		cfg.Debounce != want.Debounce || cfg.Thresholds.DropsPerSec != want.Thresholds.DropsPerSec {
		t.Fatalf("config %+v, want %+v", cfg, want)
	}
	for in, field := range map[string]string{
		"thresholds:\n  dropsPerSec: -1\n":  "dropsPerSec",
		"debounce:\n  settle: soon\n":       "debounce.settle",
		"thresholds:\n  pfcPause: 5\n":      "health-config",
		"thresholds:\n  require: [spine]\n": "require[0]",
	} {
		_, err := ParseConfig([]byte(in))
		var de *domain.Error
		if !asErr(err, &de) || de.Field != field {
			t.Errorf("%q: %v, want an invalid %s", in, err, field)
		}
	}
}

// A round answers as the live judgment does, for every job and caller.
func TestRoundAnswersAsLive(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	r := clean(ix)
	r.set(port("s1-leaf4", "swp3"), telemetry.PFCPauseRx, true, 50000, false)
	r.set(port("s2-leaf3", "swp2"), telemetry.CRCErrors, true, 3, false) // no job's port
	r.set(telemetry.Key{Kind: telemetry.KindGPU, Device: "s1-gpu001", Port: "0"}, telemetry.GPUXid, false, 79, false)
	round := ix.JudgeAll(r, &th, dt.Now)
	glx := func(tenant, _ string) bool { return tenant == "glx" }
	for _, id := range ix.Jobs() {
		for _, sees := range []Viewer{All, glx} {
			live, _ := ix.JobHealth(id, r, &th, sees, dt.Now)
			got, _ := round.JobHealth(id, sees)
			if a, b := mustJSON(t, live), mustJSON(t, got); a != b {
				t.Fatalf("job %d: round %s, live %s", id, b, a)
			}
			v, _ := round.Verdict(id)
			if v.Verdict != live.Verdict || v.Message != live.Message {
				t.Fatalf("job %d: round verdict %+v, live %s %s", id, v, live.Verdict, live.Message)
			}
		}
	}
	for _, c := range []struct {
		sees   Viewer
		scoped bool
	}{{All, false}, {glx, true}} {
		live := ix.Hotspots(r, &th, c.sees, c.scoped, 0, dt.Now)
		got := round.Hotspots(r, c.sees, c.scoped, 0)
		if a, b := mustJSON(t, live), mustJSON(t, got); a != b {
			t.Fatalf("hotspots: round %s, live %s", b, a)
		}
	}
	if h := round.Hotspots(r, All, false, 0); len(h.Ports) != 2 || h.Ports[0].Port != "s2-leaf3/swp2" {
		t.Fatalf("admin hotspots %+v: want the CRC port no job uses first, then the congested uplink", h.Ports)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRoundCoversUnchangedPaths(t *testing.T) {
	w := fabricWorld(t)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	round := ix.JudgeAll(clean(ix), &th, dt.Now)
	w.With(2, func(j *domain.Job) { j.Placement = []domain.Placement{dt.On("s2-gpu002", 0)} })
	ix2 := Build(world{World: w}, ix)
	if !round.Covers(ix2, 1) || round.Covers(ix2, 2) || !round.SameTopology(ix2) {
		t.Fatal("a round covers exactly the jobs whose path did not change")
	}
}

// A GPU is also known by the UUID its node agent reported; new facts
// rebuild the paths on that server.
func TestGPUHopsFollowReportedUUIDs(t *testing.T) {
	w := fabricWorld(t)
	src := world{World: w, hosts: map[string]*domain.HostStatus{
		"s1-gpu001": {Node: "s1-gpu001", FactsHash: "a", Facts: &domain.HostFacts{GPUs: []domain.HostGPU{{Index: 0, UUID: "GPU-old"}}}},
	}}
	ix := Build(src, nil)
	uuid := func(ix *Index) string {
		p, _ := ix.Path(1)
		for _, h := range p.Hops {
			if h.Name == "s1-gpu001/gpu0" && len(h.Keys) == 2 {
				return h.Keys[1].Port
			}
		}
		return ""
	}
	if got := uuid(ix); got != "GPU-old" {
		t.Fatalf("GPU 0's UUID key %q, want GPU-old", got)
	}
	src.hosts["s1-gpu001"] = &domain.HostStatus{Node: "s1-gpu001", FactsHash: "b", Facts: &domain.HostFacts{GPUs: []domain.HostGPU{{Index: 0, UUID: "GPU-new"}}}}
	if got := uuid(Build(src, ix)); got != "GPU-new" {
		t.Fatalf("after new facts GPU 0's UUID key %q, want GPU-new", got)
	}
}
