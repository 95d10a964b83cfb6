package server_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/server"
)

// The fabric loop with a fault injected into its compile, as a compiler
// bug would break the intent (the mutations of
// internal/fabric/verify/mutate_test.go): what the verifier fails on must
// never reach a switch, only the jobs the failures implicate wait, and
// they come up once the fault is gone.

// faultyFabric is a switchable fault and the broken configurations it
// made: every device the fault changed, rendered as the fault left it.
type faultyFabric struct {
	on     atomic.Bool
	break_ func(*fabric.Intent) // breaks it in place
	mu     sync.Mutex
	broken map[string]bool // configKey of every broken device config
}

func (f *faultyFabric) hook(in fabric.Input, it *fabric.Intent) {
	if !f.on.Load() {
		return
	}
	before, err := render.RenderIntent(it)
	if err != nil {
		panic(err)
	}
	f.break_(it)
	after, err := render.RenderIntent(it)
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, df := range after {
		if k := configKey(df.Device, df.Files); k != configKey(before[i].Device, before[i].Files) {
			f.broken[k] = true
		}
	}
}

func (f *faultyFabric) brokenConfigs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.broken)
}

func configKey(device string, files []render.File) string {
	var b strings.Builder
	b.WriteString(device)
	for _, f := range files {
		b.WriteString("\x00" + f.Name + "\x00" + f.Content)
	}
	return b.String()
}

// recordingDriver is the file driver, remembering every configuration it
// applied: what the switches were given, in order.
type recordingDriver struct {
	deploy.File
	mu      sync.Mutex
	applied []string // configKey
}

func (r *recordingDriver) Apply(ctx context.Context, d deploy.Device) error {
	r.mu.Lock()
	r.applied = append(r.applied, configKey(d.Name, d.Files))
	r.mu.Unlock()
	return r.File.Apply(ctx, d)
}

// noBrokenConfig fails when a switch was ever given a configuration the
// fault broke.
func noBrokenConfig(t *testing.T, drv *recordingDriver, f *faultyFabric) {
	t.Helper()
	if f.brokenConfigs() == 0 {
		t.Fatal("the fault broke no device's configuration: the test tests nothing")
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range drv.applied {
		if f.broken[k] {
			device, _, _ := strings.Cut(k, "\x00")
			t.Fatalf("device %s was given a configuration the verifier fails on", device)
		}
	}
}

// startFaulty starts a server whose fabric loop compiles through f, with a
// recording file driver.
func startFaulty(t *testing.T, f *faultyFabric) (*recordingDriver, *client.Client, *server.Server) {
	t.Helper()
	f.broken = map[string]bool{}
	drv := &recordingDriver{File: deploy.File{Dir: t.TempDir()}}
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Driver = drv
		server.InjectFabricFault(cfg, f.hook)
	})
	admin := c.Client(0)
	seed(t, admin) // acme: server isolation + segmentation; globex: GPU isolation, vlan-aware
	return drv, admin, c.Servers[0]
}

// tenantVRF is tenant's VRF on d, or "".
func tenantVRF(d *fabric.Device, tenant string) string {
	for _, v := range d.VRFs {
		if v.Tenant == tenant {
			return v.Name
		}
	}
	return ""
}

func ready(j *domain.Job) bool { return j.State == domain.JobReady }

// TestFabricVerifyHoldsOnlyTheImplicatedJob: the compile puts acme's job's
// ports into globex's VRF. The job is held (its reason says the verifier
// refused its port, and names nobody else), globex's new job deploys and
// is Ready, no switch is ever given the broken configuration, and once the
// fault is gone the held job's network comes up.
func TestFabricVerifyHoldsOnlyTheImplicatedJob(t *testing.T) {
	f := &faultyFabric{break_: func(it *fabric.Intent) {
		for i := range it.Devices {
			d := &it.Devices[i]
			for j := range d.Ports {
				if p := &d.Ports[j]; p.Tenant == "acme" && tenantVRF(d, "globex") != "" {
					p.VRF = tenantVRF(d, "globex")
				}
			}
		}
	}}
	drv, admin, srv := startFaulty(t, f)
	g1 := submit(t, admin, "globex", "infer", 1)
	waitJob(t, admin, g1.ID, "Ready", ready)

	f.on.Store(true)
	a := submit(t, admin, "acme", "research", 8)
	g2 := submit(t, admin, "globex", "infer", 1)
	waitJob(t, admin, g2.ID, "Ready (another tenant's change goes on)", ready)
	held := waitJob(t, admin, a.ID, "held for the verifier (or Ready)", func(j *domain.Job) bool {
		return ready(j) || j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "the verifier refused")
	})
	if err := srv.DeploysSettled(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	noBrokenConfig(t, drv, f)
	if held.State != domain.JobPlaced {
		t.Fatalf("job %d is %s: its port is in another tenant's VRF", held.ID, held.State)
	}
	if !strings.Contains(held.Reason.Message, "rule link-tenant") || !strings.Contains(held.Reason.Message, "port s1-leaf") {
		t.Errorf("held job's reason names neither its port nor the rule: %q", held.Reason.Message)
	}
	// The attacker's side: acme's own token sees why, without globex's
	// name; globex's token does not see acme's job at all.
	acme := as(t, srv.URL(), mustToken(t, admin, domain.RoleMember, "acme", "research"))
	globex := as(t, srv.URL(), mustToken(t, admin, domain.RoleMember, "globex", "infer"))
	if j, err := acme.Job(ctxT(t), a.ID); err != nil || j.Reason == nil || strings.Contains(j.Reason.Message, "globex") {
		t.Fatalf("acme's view of its held job (%v): %+v", err, j.Reason)
	}
	if _, err := globex.Job(ctxT(t), a.ID); !isNotFound(err) {
		t.Fatalf("globex asking for acme's held job: %v, want not found", err)
	}
	// The admin sees the failure; the revision is not blocked.
	var revs []api.RevisionInfo
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/revisions", nil, &revs); err != nil {
		t.Fatal(err)
	}
	last := revs[len(revs)-1]
	if last.Blocked || !strings.Contains(last.Cause, "1 held: the verifier failed on their configuration") || !strings.Contains(last.Cause, "link-tenant") {
		t.Fatalf("latest revision: %+v", last)
	}

	// The fault goes away: at the next compile (here an admin's `fabric
	// deploy`) the job's network comes up.
	f.on.Store(false)
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, a.ID, "Ready once the fault is gone", ready)
	if err := srv.DeploysSettled(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	noBrokenConfig(t, drv, f)
}

// TestFabricVerifyBlocksTenantLeak: the compile gives globex's VRF on one
// leaf acme's route target, a leak no job accounts for. The revision is
// committed blocked, no switch gets it (nor any later one while the fault
// lasts), the placed job waits saying why, `fabric status` and `fabric
// revisions` say "verify failed"; the fault gone, the job comes up. Then
// an admin's override, with a reason, deploys a blocked revision, in the
// events.
func TestFabricVerifyBlocksTenantLeak(t *testing.T) {
	f := &faultyFabric{break_: func(it *fabric.Intent) {
		// On one leaf only, so that no device has one target twice (the
		// deploy's lint refuses that): there, acme's VRF gets a target of
		// its own and globex's exports and imports acme's, which acme's
		// VRFs on every other leaf import.
		d := it.Device("s1-leaf0")
		acme, globex := d.VRF(tenantVRF(d, "acme")), d.VRF(tenantVRF(d, "globex"))
		globex.RT = acme.RT
		acme.RT.Value += 9000
	}}
	drv, admin, srv := startFaulty(t, f)
	g1 := submit(t, admin, "globex", "infer", 1)
	waitJob(t, admin, g1.ID, "Ready", ready)

	f.on.Store(true)
	a := submit(t, admin, "acme", "research", 8)
	waiting := waitJob(t, admin, a.ID, "waiting on a blocked revision (or Ready)", func(j *domain.Job) bool {
		return ready(j) || j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "the verifier failed")
	})
	if err := srv.DeploysSettled(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	noBrokenConfig(t, drv, f)
	if waiting.State != domain.JobPlaced {
		t.Fatalf("job %d is %s on a revision the verifier fails on", waiting.ID, waiting.State)
	}
	if strings.Contains(waiting.Reason.Message, "globex") {
		t.Fatalf("acme's job's reason names another tenant: %q", waiting.Reason.Message)
	}
	var st api.FabricStatus
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.Blocked, "verify failed: ") || !strings.Contains(st.Blocked, "rt-") || st.Deployable >= st.Revision {
		t.Fatalf("status of a blocked fabric: revision %d, deployable %d, blocked %q", st.Revision, st.Deployable, st.Blocked)
	}
	var revs []api.RevisionInfo
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/revisions", nil, &revs); err != nil {
		t.Fatal(err)
	}
	if last := revs[len(revs)-1]; !last.Blocked || len(last.Verify) == 0 {
		t.Fatalf("latest revision is not blocked: %+v", last)
	}
	// A deploy round (an admin's, retrying everything) gives nothing.
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, &st); err != nil {
		t.Fatal(err)
	}
	if err := srv.DeploysSettled(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	noBrokenConfig(t, drv, f)
	if j, _ := admin.Job(ctxT(t), a.ID); j.State != domain.JobPlaced {
		t.Fatalf("job %d is %s on a blocked revision", j.ID, j.State)
	}

	// The fault gone, the next compile verifies and deploys.
	f.on.Store(false)
	st = api.FabricStatus{} // not the blocked one's fields
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, &st); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, a.ID, "Ready once the fault is gone", ready)
	noBrokenConfig(t, drv, f)
	if st.Blocked != "" || st.Deployable != st.Revision {
		t.Fatalf("status after recovery: revision %d, deployable %d, blocked %q", st.Revision, st.Deployable, st.Blocked)
	}

	// The override: refused without a reason, or with nothing blocked;
	// with one it deploys the blocked revision and says who and why.
	for _, q := range []string{"override=", "override=" + url.QueryEscape("nothing blocked")} {
		if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy?"+q, nil, &st); err == nil {
			t.Fatalf("POST /v1/fabric/deploy?%s with no blocked revision: accepted", q)
		}
	}
	f.on.Store(true)
	a2 := submit(t, admin, "acme", "prod", 8)
	waitJob(t, admin, a2.ID, "waiting on a blocked revision", func(j *domain.Job) bool {
		return j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "the verifier failed")
	})
	// A tenant's admin can neither override nor read the failures.
	acmeAdmin := as(t, srv.URL(), mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""))
	if err := acmeAdmin.Do(ctxT(t), "POST", "/v1/fabric/deploy?override=mine", nil, &st); err == nil || domain.CodeOf(err) != domain.CodePermissionDenied {
		t.Fatalf("acme's admin overriding the verifier: %v, want permission denied", err)
	}
	for _, path := range []string{"/v1/fabric/status", "/v1/fabric/revisions"} {
		if err := acmeAdmin.Do(ctxT(t), "GET", path, nil, nil); err == nil {
			t.Fatalf("acme's admin reads %s", path)
		}
	}
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy?override=", nil, &st); !isInvalid(err) {
		t.Fatalf("override without a reason: %v, want invalid", err)
	}
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy?override="+url.QueryEscape("INC-7: the verifier's rule is wrong here"), nil, &st); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, a2.ID, "Ready on the overridden revision", ready)
	evs, err := admin.Events(ctxT(t), client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || (e.Action == "fabric.override" && strings.HasPrefix(e.Actor, "admin:") && strings.Contains(e.Message, "INC-7"))
	}
	if !found {
		t.Fatal("no fabric.override event naming the admin and the reason")
	}
}

func isNotFound(err error) bool { return err != nil && domain.CodeOf(err) == domain.CodeNotFound }
func isInvalid(err error) bool  { return err != nil && domain.CodeOf(err) == domain.CodeInvalidArgument }

// TestFabricVerifyUnblocksTheSameConfig: a fault the verifier sees but the
// rendered configuration does not show (an extra route-target import in
// the intent: no renderer writes it) blocks the revision; once the fault
// is gone the compile is the blocked revision's configuration again, and
// since it verifies now it is committed, unblocked, and deployed.
func TestFabricVerifyUnblocksTheSameConfig(t *testing.T) {
	f := &faultyFabric{break_: func(it *fabric.Intent) {
		d := it.Device("s1-leaf0")
		acme, globex := d.VRF(tenantVRF(d, "acme")), d.VRF(tenantVRF(d, "globex"))
		globex.Imports = append(globex.Imports, acme.RT)
	}}
	_, admin, _ := startFaulty(t, f)
	f.on.Store(true)
	a := submit(t, admin, "acme", "research", 8)
	j := waitJob(t, admin, a.ID, "waiting on a blocked revision (or Ready)", func(j *domain.Job) bool {
		return ready(j) || j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "the verifier failed")
	})
	if j.State != domain.JobPlaced {
		t.Fatalf("job %d is %s on a revision the verifier fails on", j.ID, j.State)
	}
	var st api.FabricStatus
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/status", nil, &st); err != nil || !strings.Contains(st.Blocked, "rt-import") {
		t.Fatalf("status (%v): %+v", err, st)
	}
	f.on.Store(false)
	st = api.FabricStatus{}
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, &st); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, a.ID, "Ready once the fault is gone", ready)
	if st.Blocked != "" || st.Deployable != st.Revision {
		t.Fatalf("status after recovery: revision %d, deployable %d, blocked %q", st.Revision, st.Deployable, st.Blocked)
	}
}

// TestDeployErrorStaysWithTheAdmin: a device's deploy error (a switch's or
// the lint's account, naming the VRFs on it) is the admin's: the job
// waiting on that leaf says its leaf failed, never the error, which names
// other tenants.
func TestDeployErrorStaysWithTheAdmin(t *testing.T) {
	drv := &flaky{File: deploy.File{Dir: t.TempDir()}, fail: map[string]bool{"s1-leaf7": true}}
	c := startTuned(t, func(cfg *server.Config) { cfg.Driver = drv })
	admin := c.Client(0)
	seed(t, admin)
	g := submit(t, admin, "globex", "infer", 1)
	waitJob(t, admin, g.ID, "Ready", ready)
	a := submit(t, admin, "acme", "research", 8)
	waitJob(t, admin, a.ID, "waiting on s1-leaf7", func(j *domain.Job) bool {
		return j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "s1-leaf7 (deploy failed")
	})
	acme := as(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleMember, "acme", "research"))
	j, err := acme.Job(ctxT(t), a.ID)
	if err != nil || j.Reason == nil {
		t.Fatalf("acme's job (%v): %+v", err, j)
	}
	// flaky's error names the device; the lint's names its VRFs.
	if strings.Contains(j.Reason.Message, "connection refused") {
		t.Fatalf("acme's job's reason carries the device's error: %q", j.Reason.Message)
	}
	var st api.FabricStatus
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Devices {
		if d.Name == "s1-leaf7" && !strings.Contains(d.Error, "connection refused") {
			t.Fatalf("the admin's status lacks the device's error: %+v", d)
		}
	}
}
