package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// applied is one device config a driver applied: the VRF of every server
// port in it ("" for none), and when the apply finished.
type applied struct {
	device string
	rev    uint64
	ports  map[string]string
	done   time.Time
}

// recorder is a driver that records the order of the device configs it
// applies, and can be made to wait (to let the state move on meanwhile).
type recorder struct {
	mu   sync.Mutex
	log  []applied
	gate chan struct{} // non-nil: Apply waits until it is closed
	// inApply, while held, is closed by the first Apply that waits.
	inApply chan struct{}
}

var portStanza = regexp.MustCompile(`(?m)^interface (swp\d+)(?: vrf (\S+))?$`)

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Apply(ctx context.Context, d deploy.Device) error {
	r.mu.Lock()
	gate := r.gate
	if gate != nil && r.inApply != nil {
		close(r.inApply)
		r.inApply = nil
	}
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a := applied{device: d.Name, rev: d.Rev, ports: map[string]string{}}
	for _, f := range d.Files {
		if f.Name == "frr.conf" {
			for _, m := range portStanza.FindAllStringSubmatch(f.Content, -1) {
				a.ports[m[1]] = m[2]
			}
		}
	}
	a.done = time.Now()
	r.mu.Lock()
	r.log = append(r.log, a)
	r.mu.Unlock()
	return nil
}

// hold makes Apply wait until release; the channel it returns is closed
// once an Apply is waiting.
func (r *recorder) hold() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate, r.inApply = make(chan struct{}), make(chan struct{})
	return r.inApply
}

func (r *recorder) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.gate)
	r.gate, r.inApply = nil, nil
}

// history is the VRF of a port in every config applied to its leaf.
func (r *recorder) history(device, port string) []applied {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []applied
	for _, a := range r.log {
		if a.device == device {
			out = append(out, a)
		}
	}
	return out
}

// TestTenantMoveOrder: GPUs that go from one tenant's job to another's
// at once (the old job ends and the waiting job is placed on its GPUs
// before the fabric compiles again) never have their ports in both
// memberships, nor switch from one to the other in one config: the leaf
// first gets a config with the port in no VRF, and only after that is
// applied one with the new VRF; the new job is Ready only after that.
// The same holds between two jobs of a segmented tenant (new group).
func TestTenantMoveOrder(t *testing.T) {
	drv := &recorder{}
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Driver = drv
		cfg.ScheduleInterval = 50 * time.Millisecond
	})
	admin := c.Client(0)
	ctx := ctxT(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 1, GPUsPerServer: 2, Spines: 1, NOS: "frr"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []api.TenantCreateRequest{
		{Name: "old", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5},
		{Name: "new", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true},
	} {
		if _, err := admin.CreateTenant(ctx, tr); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateWorkspace(ctx, tr.Name, api.WorkspaceCreateRequest{Name: "w", BorrowLimit: 2}); err != nil {
			t.Fatal(err)
		}
	}
	leaf, port := "s1-leaf0", "swp1" // GPU 0's NIC

	// move ends job from and lets the waiting job to take its GPUs while
	// the driver is busy, so the next compile sees both changes at once.
	move := func(from *domain.Job, tenant string) *domain.Job {
		t.Helper()
		to, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: tenant, Workspace: "w", GPUs: 2})
		if err != nil {
			t.Fatal(err)
		}
		inApply := drv.hold()
		// Something to deploy while the job changes hands: a tenant.
		if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: fmt.Sprintf("busy%d", to.ID), Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
		select { // the fabric loop is in Apply
		case <-inApply:
		case <-ctx.Done():
			t.Fatal("the fabric loop never deployed the new tenant")
		}
		if _, err := admin.CancelJob(ctx, from.ID); err != nil {
			t.Fatal(err)
		}
		waitJob(t, admin, to.ID, "placed", func(j *domain.Job) bool { return j.PlacedAt != nil })
		drv.release()
		return waitJob(t, admin, to.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	}
	check := func(step string, oldVRF, newVRF string, ready *domain.Job) {
		t.Helper()
		h := drv.history(leaf, port)
		var seq []string
		removed, added := -1, -1
		for i, a := range h {
			seq = append(seq, fmt.Sprintf("r%d:%q", a.rev, a.ports[port]))
			if i > 0 && h[i-1].ports[port] != "" && a.ports[port] != "" && h[i-1].ports[port] != a.ports[port] {
				t.Errorf("%s: %s/%s went from %q to %q in one config (revision %d)", step, leaf, port, h[i-1].ports[port], a.ports[port], a.rev)
			}
			if a.ports[port] == "" && removed < 0 && i > 0 && h[i-1].ports[port] == oldVRF {
				removed = i
			}
			if a.ports[port] == newVRF && added < 0 && removed >= 0 {
				added = i
			}
		}
		t.Logf("%s: %s/%s by applied config: %s", step, leaf, port, strings.Join(seq, " "))
		if removed < 0 || added < 0 {
			t.Fatalf("%s: no removal then addition of %s/%s: %s", step, leaf, port, strings.Join(seq, " "))
		}
		if !h[added].done.Before(ready.UpdatedAt) && !h[added].done.Equal(ready.UpdatedAt) {
			t.Errorf("%s: the job was Ready at %s, before its port's config was applied at %s", step, ready.UpdatedAt, h[added].done)
		}
		drv.mu.Lock()
		drv.log = nil
		drv.mu.Unlock()
	}

	j1, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "old", Workspace: "w", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	// Tenant old -> tenant new (another VRF).
	j2 := move(j1, "new")
	check("tenant old -> tenant new", "old", "new", j2)
	// Job -> job of the segmented tenant (same VRF, another group): out
	// of the VRF, then back in with the new group; a revision says it held
	// the job back.
	revBefore := fabricRev(t, admin)
	j3 := move(j2, "new")
	check("job -> job of a segmented tenant", "new", "new", j3)
	var revs []struct {
		Rev   uint64 `json:"rev"`
		Cause string `json:"cause"`
	}
	if err := admin.Do(ctx, "GET", "/v1/fabric/revisions", nil, &revs); err != nil {
		t.Fatal(err)
	}
	heldRev := uint64(0)
	for _, r := range revs {
		if r.Rev > revBefore && strings.Contains(r.Cause, "held until a port's previous membership is removed") {
			heldRev = r.Rev
		}
	}
	if heldRev == 0 || j3.NetworkRev <= heldRev {
		t.Fatalf("job %d of the segmented tenant got its network in revision %d; no revision held it back first (revisions %+v)", j3.ID, j3.NetworkRev, revs)
	}
}

func fabricRev(t *testing.T, c interface {
	Do(context.Context, string, string, any, any) error
}) uint64 {
	t.Helper()
	var st struct {
		Revision uint64 `json:"revision"`
	}
	if err := c.Do(ctxT(t), "GET", "/v1/fabric/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st.Revision
}
