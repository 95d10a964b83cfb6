package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/cli"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/lab"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// labTopology is the lab of the end-to-end test: 2 spines, 2 stripes of 2
// rails (4 leaves), 4 servers per stripe with 2 GPUs and 2 NICs each (8
// servers, 16 GPU endpoints), every switch running FRR.
func labTopology(t *testing.T) []byte {
	t.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 2, Spines: 2, NOS: "frr"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLabEndToEnd proves isolation with packets: a jobfabric server
// deploys a real FRR EVPN fabric (the lab) through its frr driver, and
// pings between GPU endpoints must match what the tenants and jobs allow
// at every step; `fabric verify` must agree.
func TestLabEndToEnd(t *testing.T) {
	e, topoFile := startE2E(t, 5*time.Minute)
	ctx, l, start := e.ctx, e.l, e.start
	var exists *lab.ExistsError
	if _, err := lab.Up(ctx, lab.Options{Topology: topoFile, Dir: e.base}); !errors.As(err, &exists) || !strings.Contains(err.Error(), "lab down") {
		t.Fatalf("a second lab up answered %v, want a refusal naming the lab that is up", err)
	}
	base := e.base
	e.createTenants()

	// Tenant A (server isolation, job segmentation) runs jobs 100 and 101
	// on two servers each, one per stripe: every job spans all 4 leaves.
	// Tenant B (GPU isolation) runs job 200 on one GPU of two servers A
	// does not own: the other NIC of those servers stays unassigned.
	j100 := e.place(domain.JobSpec{Name: "job-100", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	j101 := e.place(domain.JobSpec{Name: "job-101", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	j200 := e.place(domain.JobSpec{Name: "job-200", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 1}, "s1-gpu003", "s2-gpu003")
	e.waitReady(j100, j101, j200)
	e.check("jobs 100, 101 (tenant A) and 200 (tenant B) ready")
	g101 := e.group("tenant-a", "s1-leaf0", "swp2")

	// Job 101 ends: its endpoints reach nothing any more.
	e.end(j101)
	e.check("job 101 ended")

	// Job 102 on the same GPUs: a new group, reaching only its own peers.
	j102 := e.place(domain.JobSpec{Name: "job-102", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	e.waitReady(j102)
	if g102 := e.group("tenant-a", "s1-leaf0", "swp2"); g102 == 0 || g102 == g101 {
		t.Fatalf("job 102 on job 101's GPUs has group %d, job 101 had %d: want a new group", g102, g101)
	} else {
		t.Logf("job 101 had group %d; job 102 on the same GPUs has group %d", g101, g102)
	}
	e.check("job 102 ready on job 101's GPUs")

	// A server moves from A to B: A's job there ends, B's job takes it;
	// the server keeps its addresses and now reaches only B.
	e.end(j100)
	before := e.addresses("s1-gpu001")
	j201 := e.place(domain.JobSpec{Name: "job-201", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 2}, "s1-gpu001")
	e.waitReady(j201)
	if after := e.addresses("s1-gpu001"); !slices.Equal(before, after) {
		t.Fatalf("s1-gpu001's addresses changed when it moved to tenant B: %v -> %v", before, after)
	}
	e.check("server s1-gpu001 moved from tenant A (job 100 ended) to tenant B (job 201)")

	// A tenant's VRF comes to every leaf and goes again (the lab driver
	// deletes its namespaces after the reload): the daemons stay up, the
	// fabric stays converged, the others' reachability is untouched.
	rev := e.deployed(nil)
	if _, err := e.admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "tenant-c", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	rev = e.deployed(&rev)
	if ns := e.vrfNamespaces("tenant-c"); len(ns) != 4 {
		t.Fatalf("tenant-c's VRF is in namespaces %v, want one on each of the 4 leaves", ns)
	}
	if err := e.admin.Do(ctx, "DELETE", "/v1/tenants/tenant-c", nil, nil); err != nil {
		t.Fatal(err)
	}
	e.deployed(&rev)
	if ns := e.vrfNamespaces("tenant-c"); len(ns) != 0 {
		t.Fatalf("tenant-c is deleted, but its VRF namespaces %v are left", ns)
	}
	for _, d := range l.Status(ctx).Devices {
		if !d.Daemons {
			t.Fatalf("%s's daemons stopped answering after a VRF was removed: %s", d.Name, d.Error)
		}
	}
	if err := l.WaitConverged(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.check("tenant C created and deleted")

	// The CLI sees the same lab.
	var out, errb bytes.Buffer
	if code := cli.Run(ctx, []string{"lab", "status", "--lab-dir", base, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("jobfabric lab status: exit %d: %s", code, errb.String())
	}
	var st lab.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Devices) != 6 {
		t.Fatalf("jobfabric lab status -o json: %v\n%s", err, out.String())
	}
	if code := cli.Run(ctx, []string{"lab", "ping", "--lab-dir", base, "s1-gpu001/nic0", "s2-gpu003/nic0"}, &out, &errb); code != 0 {
		t.Fatalf("jobfabric lab ping between job 201 and job 200 (tenant B): exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := cli.Run(ctx, []string{"lab", "ping", "--lab-dir", base, "--timeout", "300ms", "s1-gpu001/nic0", "10.0.0.5"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "does not reach") {
		t.Fatalf("jobfabric lab ping from tenant B to tenant A's job 102: exit %d, %q; want a failure", code, errb.String())
	}

	sort.Slice(e.latencies, func(i, j int) bool { return e.latencies[i].d < e.latencies[j].d })
	var parts []string
	for _, x := range e.latencies {
		parts = append(parts, fmt.Sprintf("%s %s (Ready after %s)", x.job, x.d.Round(time.Millisecond), e.gates[x.job].Round(time.Millisecond)))
	}
	if len(e.latencies) > 0 {
		t.Logf("placed -> first ping between the job's endpoints: median %s over %d jobs (%s)",
			e.latencies[len(e.latencies)/2].d.Round(time.Millisecond), len(e.latencies), strings.Join(parts, ", "))
	}
	t.Logf("end-to-end test took %s", time.Since(start).Round(time.Millisecond))
}

// startE2E builds the test lab (skipping the test where a lab cannot be
// built), starts a jobfabric server deploying it through the frr driver,
// applies the topology and waits until the underlay has converged. It
// returns the harness and the topology file; tune, when given, changes the
// server's configuration once the lab is up.
func startE2E(t *testing.T, timeout time.Duration, tune ...func(*lab.Lab, *server.Config)) (*e2e, string) {
	t.Helper()
	return startE2ETopology(t, timeout, labTopology, tune...)
}

// startE2ETopology is startE2E on the lab topology topo gives.
func startE2ETopology(t *testing.T, timeout time.Duration, topo func(*testing.T) []byte, tune ...func(*lab.Lab, *server.Config)) (*e2e, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("the lab tests build an FRR fabric in network namespaces: skipped with -short")
	}
	if err := lab.Check(); err != nil {
		t.Skipf("skipping the lab test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	start := time.Now()

	// The daemons (user frr) write into the run directory: not under a
	// 0700 test directory.
	base, err := os.MkdirTemp("", "jobfabric-lab-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() {
		if os.Getenv("JOBFABRIC_LAB_KEEP") == "" || !t.Failed() {
			os.RemoveAll(base)
		}
	})
	topoFile := filepath.Join(base, "lab.yaml")
	topoYAML := topo(t)
	if err := os.WriteFile(topoFile, topoYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := lab.Up(ctx, lab.Options{Topology: topoFile, Dir: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("JOBFABRIC_LAB_KEEP") != "" && t.Failed() {
			t.Logf("JOBFABRIC_LAB_KEEP: the lab stays up for inspection: jobfabric lab status --lab-dir %s; jobfabric lab down --lab-dir %s", base, base)
			return
		}
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("lab down: %v", err)
		}
		out, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(out), l.Prefix) {
			t.Errorf("namespaces of the lab are left after lab down:\n%s", out)
		}
	})
	t.Logf("lab %s up in %s (%d switches, %d endpoints)", l.Prefix, time.Since(start).Round(time.Millisecond), len(l.Devices), len(l.Endpoints))

	// What `jobfabric server --fabric-driver lab --frr-targets FILE` does.
	driver, err := labdeploy.Load(l.TargetsFile())
	if err != nil {
		t.Fatal(err)
	}
	// As `jobfabric server --fabric-driver lab` does: the watch repairs
	// zebra's EVPN state between deploys (labdeploy/evpnsync.go). It stops
	// before the lab goes down (cleanups run last registered first).
	driver.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wctx, wcancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); driver.WatchEVPN(wctx, labdeploy.WatchInterval) }()
	t.Cleanup(func() { wcancel(); <-watched })
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{RaftTimeout: 300 * time.Millisecond, Tune: func(cfg *server.Config) {
		cfg.FabricDriver, cfg.Driver = "lab", driver
		cfg.ScheduleInterval = 250 * time.Millisecond
		for _, f := range tune {
			f(l, cfg)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &e2e{t: t, ctx: ctx, l: l, admin: c.Client(0), url: c.Servers[0].URL(), token: c.AdminToken, gates: map[string]time.Duration{}, base: base, start: start}

	if _, err := e.admin.ApplyTopology(ctx, topoYAML, false); err != nil {
		t.Fatal(err)
	}
	// The wait covers the underlay's first deploy as well as BGP: on a
	// loaded CI machine the deploy alone took most of a minute, and the
	// sessions came up seconds after a 60 s wait gave up.
	if err := l.WaitConverged(ctx, 150*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("underlay deployed and converged at %s", time.Since(start).Round(time.Millisecond))
	return e, topoFile
}

// createTenants creates tenant A (server isolation, job segmentation) and
// tenant B (GPU isolation), both pure type-5, each with a workspace
// "train", and waits until their VRFs are deployed on every leaf.
func (e *e2e) createTenants() {
	e.t.Helper()
	rev0 := e.deployed(nil)
	tenantsAt := time.Now()
	for _, tr := range []api.TenantCreateRequest{
		{Name: "tenant-a", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true},
		{Name: "tenant-b", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5},
	} {
		if _, err := e.admin.CreateTenant(e.ctx, tr); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.admin.CreateWorkspace(e.ctx, tr.Name, api.WorkspaceCreateRequest{Name: "train", BorrowLimit: 16}); err != nil {
			e.t.Fatal(err)
		}
	}
	// The tenants' VRFs (namespace, L3VNI, BGP instance) on every leaf.
	e.deployed(&rev0)
	e.t.Logf("tenant VRFs deployed on every leaf %s after the tenants were created", time.Since(tenantsAt).Round(time.Millisecond))
}

type e2e struct {
	t          *testing.T
	ctx        context.Context
	l          *lab.Lab
	admin      *client.Client
	url, token string
	latencies  []latency
	probes     []chan latency
	gates      map[string]time.Duration // job -> placed to Ready (the network gate)
	base       string                   // the lab's state directory
	start      time.Time
}

type latency struct {
	job string
	d   time.Duration
	err error
}

func (e *e2e) setCordon(server string, on bool) {
	e.t.Helper()
	var cond domain.NodeCondition
	if err := e.admin.Do(e.ctx, "PATCH", "/v1/nodes/"+server, api.NodeUpdateRequest{Cordoned: &on, Reason: "lab test steers placement"}, &cond); err != nil {
		e.t.Fatalf("cordon %s=%v: %v", server, on, err)
	}
}

// endpointsOf lists the lab endpoints a job's placement binds: every NIC
// of a server of a server-isolated tenant, else the NICs of its GPUs.
func (e *e2e) endpointsOf(j *domain.Job, iso domain.Isolation) []lab.Endpoint {
	var out []lab.Endpoint
	for _, p := range j.Placement {
		for _, ep := range e.l.Endpoints {
			if ep.Server == p.Server && (iso == domain.IsolationServer || slices.Contains(p.GPUs, ep.GPU)) {
				out = append(out, ep)
			}
		}
	}
	return out
}

// place submits spec with every other server cordoned, so the scheduler
// can only pick servers, checks it did, and starts timing the first ping
// between two of the job's endpoints on different leaves.
func (e *e2e) place(spec domain.JobSpec, servers ...string) *domain.Job {
	e.t.Helper()
	var cordoned []string
	for _, ep := range e.l.Endpoints {
		if !slices.Contains(servers, ep.Server) && !slices.Contains(cordoned, ep.Server) {
			e.setCordon(ep.Server, true)
			cordoned = append(cordoned, ep.Server)
		}
	}
	j, err := e.admin.SubmitJob(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("submit %s: %v", spec.Name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for j.PlacedAt == nil {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s was not placed within 30s: %s %+v", spec.Name, j.State, j.Reason)
		}
		time.Sleep(20 * time.Millisecond)
		if j, err = e.admin.Job(e.ctx, j.ID); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, s := range cordoned {
		e.setCordon(s, false)
	}
	var got []string
	for _, p := range j.Placement {
		got = append(got, p.Server)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(servers)); !slices.Equal(got, want) {
		e.t.Fatalf("%s landed on %v, want %v", spec.Name, got, want)
	}
	iso := domain.IsolationGPU
	if spec.Tenant == "tenant-a" {
		iso = domain.IsolationServer
	}
	eps := e.endpointsOf(j, iso)
	src, dst := eps[0], eps[0]
	for _, x := range eps[1:] {
		if x.Leaf != src.Leaf {
			dst = x
			break
		}
	}
	if len(eps) == 1 {
		e.t.Logf("%s (job %d) placed on %v (one endpoint: no first-ping probe)", spec.Name, j.ID, got)
		return j
	}
	if dst.Leaf == src.Leaf {
		e.t.Fatalf("%s has no two endpoints on different leaves: %v", spec.Name, eps)
	}
	placed := *j.PlacedAt
	ch := make(chan latency, 1)
	e.probes = append(e.probes, ch)
	name := spec.Name
	go func() {
		at, err := e.l.FirstReply(e.ctx, &src, dst.Addr4(), 20*time.Millisecond, 60*time.Second)
		if err != nil {
			ch <- latency{job: name, d: -1, err: err}
			return
		}
		ch <- latency{job: name, d: at.Sub(placed)}
	}()
	e.t.Logf("%s (job %d) placed on %v; probing %s -> %s", name, j.ID, got, src.Name(), dst.Name())
	return j
}

// waitReady waits until the jobs are Ready (their fabric revision is
// deployed on their leaves) and for their first pings.
func (e *e2e) waitReady(jobs ...*domain.Job) {
	e.t.Helper()
	for _, j := range jobs {
		deadline := time.Now().Add(60 * time.Second)
		for {
			cur, err := e.admin.Job(e.ctx, j.ID)
			if err != nil {
				e.t.Fatal(err)
			}
			if cur.State == domain.JobReady {
				if cur.PlacedAt != nil {
					e.gates[cur.Name] = cur.UpdatedAt.Sub(*cur.PlacedAt)
				}
				break
			}
			if time.Now().After(deadline) {
				var st state.FabricStatus
				e.admin.Do(e.ctx, "GET", "/v1/fabric/status", nil, &st)
				e.t.Fatalf("%s is %s after 60s (%+v); fabric status: %+v", cur.Name, cur.State, cur.Reason, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, ch := range e.probes {
		x := <-ch
		if x.d < 0 {
			var b strings.Builder
			e.l.Dump(e.ctx, &b)
			e.t.Fatalf("%s: %v\n%s", x.job, x.err, b.String())
		}
		e.latencies = append(e.latencies, x)
	}
	e.probes = nil
}

// end cancels a job and waits until the fabric without it is deployed.
func (e *e2e) end(j *domain.Job) {
	e.t.Helper()
	rev := e.deployed(nil)
	if _, err := e.admin.CancelJob(e.ctx, j.ID); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("%s (job %d) ended; revision %d deployed", j.Name, j.ID, e.deployed(&rev))
}

// deployed waits until a revision after *after (nil: any) is deployed on
// every device, and returns it.
func (e *e2e) deployed(after *uint64) uint64 {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st state.FabricStatus
		if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/status", nil, &st); err != nil {
			e.t.Fatal(err)
		}
		synced := after == nil || st.Revision > *after
		for _, d := range st.Devices {
			if d.Deployed != d.DesiredHash || d.Error != "" {
				synced = false
			}
		}
		if synced {
			return st.Revision
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no new revision deployed on every device within 60s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vrfNamespaces lists the lab's VRF namespaces of a VRF, one per leaf
// that has it.
func (e *e2e) vrfNamespaces(vrf string) []string {
	var out []string
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), e.l.Prefix) && strings.HasSuffix(en.Name(), ".vrf-"+vrf) {
			out = append(out, en.Name())
		}
	}
	return out
}

// group is the GBP group of a port in a VRF's nftables ruleset on a leaf
// (the deployed revision), 0 if none.
func (e *e2e) group(vrf, leaf, port string) int {
	e.t.Helper()
	var cfgs []render.DeviceFiles
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/configs?device="+leaf, nil, &cfgs); err != nil {
		e.t.Fatal(err)
	}
	re := regexp.MustCompile(`"` + regexp.QuoteMeta(port) + `" : (\d+),`)
	for _, d := range cfgs {
		for _, f := range d.Files {
			if f.Name == "gbp-"+vrf+".nft" {
				if m := re.FindStringSubmatch(f.Content); m != nil {
					n, _ := strconv.Atoi(m[1])
					return n
				}
			}
		}
	}
	return 0
}

// addresses lists the IPv4 addresses of a server's endpoints, read from
// their namespaces.
func (e *e2e) addresses(server string) []string {
	e.t.Helper()
	var out []string
	for _, ep := range e.l.Endpoints {
		if ep.Server != server {
			continue
		}
		b, err := exec.Command("ip", "-n", ep.Netns, "-4", "-o", "addr", "show", "dev", ep.Iface).Output()
		if err != nil {
			e.t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			if strings.Contains(f, "/") && strings.Count(f, ".") == 3 {
				out = append(out, ep.Name()+"="+f)
			}
		}
	}
	return out
}

// owner is who an endpoint belongs to.
type owner struct{ tenant, job string }

// expected derives, from the server's jobs and tenants (not from the
// fabric), which endpoint pairs must reach each other: both bound, same
// tenant, and the same job when the tenant is segmented.
func (e *e2e) expected() (map[lab.Pair]bool, map[string]owner) {
	e.t.Helper()
	tenants, err := e.admin.Tenants(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	tn := map[string]domain.Tenant{}
	for _, t := range tenants {
		tn[t.Name] = t
	}
	jobs, err := e.admin.Jobs(e.ctx, client.JobQuery{})
	if err != nil {
		e.t.Fatal(err)
	}
	owners := map[string]owner{}
	for i := range jobs {
		j := &jobs[i]
		switch j.State {
		case domain.JobPlaced, domain.JobReady, domain.JobRunning:
		default:
			continue
		}
		for _, ep := range e.endpointsOf(j, tn[j.Tenant].Isolation) {
			owners[ep.Name()] = owner{j.Tenant, j.Name}
		}
	}
	want := map[lab.Pair]bool{}
	for _, a := range e.l.Endpoints {
		for _, b := range e.l.Endpoints {
			if a.Name() == b.Name() {
				continue
			}
			oa, oka := owners[a.Name()]
			ob, okb := owners[b.Name()]
			want[lab.Pair{From: a.Name(), To: b.Name()}] = oka && okb && oa.tenant == ob.tenant &&
				(!tn[oa.tenant].JobSegmentation || oa.job == ob.job)
		}
	}
	return want, owners
}

// check pings every ordered pair of endpoints until the result is the
// expected matrix (routes take a moment to come and go), fails with the
// difference and the switches' state if it never is, and compares the
// result with `jobfabric fabric verify`.
func (e *e2e) check(step string) {
	e.t.Helper()
	want, owners := e.expected()
	deadline := time.Now().Add(30 * time.Second)
	var got map[lab.Pair]bool
	var diff []string
	for {
		got = e.l.Reach(e.ctx, e.l.Endpoints, 500*time.Millisecond)
		diff = diff[:0]
		for p, w := range want {
			if got[p] != w {
				diff = append(diff, fmt.Sprintf("%s -> %s: reached=%v, want %v", p.From, p.To, got[p], w))
			}
		}
		if len(diff) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Logf("%s:\n%s", step, e.render(got, owners))
	if len(diff) > 0 {
		sort.Strings(diff)
		var b strings.Builder
		e.l.Dump(e.ctx, &b)
		e.t.Fatalf("%s: %d of %d pairs differ from what the tenants and jobs allow:\n  %s\n%s", step, len(diff), len(want), strings.Join(diff, "\n  "), b.String())
	}
	reached := 0
	for _, ok := range got {
		if ok {
			reached++
		}
	}
	e.t.Logf("%s: %d of %d ordered pairs reach each other, all as expected", step, reached, len(got))
	e.compareVerify(step, got)
}

// render draws the ping matrix: rows send, columns receive.
func (e *e2e) render(got map[lab.Pair]bool, owners map[string]owner) string {
	var b strings.Builder
	eps := e.l.Endpoints
	fmt.Fprintf(&b, "%-28s", "")
	for i := range eps {
		fmt.Fprintf(&b, " %d", i%10)
	}
	b.WriteString("\n")
	for i, a := range eps {
		o := owners[a.Name()]
		label := "unassigned"
		if o.tenant != "" {
			label = o.tenant + "/" + o.job
		}
		fmt.Fprintf(&b, "%2d %-14s %-11s", i, a.Name(), strings.TrimPrefix(label, "tenant-"))
		for _, x := range eps {
			switch {
			case x.Name() == a.Name():
				b.WriteString(" \\")
			case got[lab.Pair{From: a.Name(), To: x.Name()}]:
				b.WriteString(" #")
			default:
				b.WriteString(" .")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// compareVerify runs `jobfabric fabric verify --matrix -o json` and checks
// that it agrees with the packets: the verifier passes, and its
// reachability matrix (leaf/port -> leaf/ports, as the deployed NOSes
// enforce it) is the ping matrix, pair by pair.
func (e *e2e) compareVerify(step string, got map[lab.Pair]bool) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(e.ctx, []string{"--server", e.url, "--token", e.token, "-o", "json", "fabric", "verify", "--matrix"}, &out, &errb)
	var v api.FabricVerify
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		e.t.Fatalf("%s: jobfabric fabric verify --matrix -o json exited %d with no report: %v\n%s%s", step, code, err, out.String(), errb.String())
	}
	if code != 0 || !v.OK {
		e.t.Fatalf("%s: the packets show isolation as intended, but jobfabric fabric verify exits %d:\n%s%s", step, code, v.Text, errb.String())
	}
	port := map[string]string{} // endpoint -> leaf/port
	for _, ep := range e.l.Endpoints {
		port[ep.Name()] = ep.Leaf + "/" + ep.Port
	}
	var diff []string
	for p, reached := range got {
		if says := slices.Contains(v.Reachability[port[p.From]], port[p.To]); says != reached {
			diff = append(diff, fmt.Sprintf("%s (%s) -> %s (%s): ping %v, verify %v", p.From, port[p.From], p.To, port[p.To], reached, says))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		e.t.Fatalf("%s: fabric verify's reachability differs from the packets on %d pairs:\n  %s", step, len(diff), strings.Join(diff, "\n  "))
	}
	e.t.Logf("%s: jobfabric fabric verify passes and its reachability matrix equals the ping matrix", step)
}

// testWriter logs through t (the lab driver's warnings show in the test's
// output, next to the step they happened in).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
