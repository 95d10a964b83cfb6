package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// recordedSwitch answers `show system routing mode` from a recording of
// internal/deploy's testdata, switchable while the test runs.
type recordedSwitch struct {
	mu   sync.Mutex
	file string
}

func (r *recordedSwitch) set(f string) { r.mu.Lock(); r.file = f; r.mu.Unlock() }

func (r *recordedSwitch) Show(_ context.Context, _, cmd string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cmd != "show system routing mode" {
		return "", os.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "testdata", "nxos", r.file))
	return string(b), err
}

// TestNXOSSwitchNotPrepared: an NX-OS leaf whose configuration needs
// security groups is not deployed until the switch runs the
// security-groups routing template; fabric status says so as the switch's
// condition, the job on it waits, and once the switch is reloaded the
// retry deploys it and the condition clears.
func TestNXOSSwitchNotPrepared(t *testing.T) {
	sw := &recordedSwitch{file: "routing-mode-reload-pending.txt"}
	drv := &deploy.Checked{Driver: &deploy.File{Dir: t.TempDir()}, Show: sw}
	c := startTuned(t, func(cfg *server.Config) { cfg.Driver = drv })
	admin := c.Client(0)
	ctx := ctxT(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8, NOS: "nxos"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 8, BorrowLimit: 8}); err != nil {
		t.Fatal(err)
	}
	j, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j.ID, "waiting on an unprepared leaf", func(j *domain.Job) bool {
		return j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "deploy failed")
	})
	var st api.FabricStatus
	if err := admin.Do(ctx, "GET", "/v1/fabric/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, d := range st.Devices {
		for _, cd := range d.Conditions {
			if cd.Type == domain.SwitchSecurityGroupsTemplate && !cd.OK && cd.Reason == "ReloadRequired" && strings.Contains(d.Error, "not prepared") {
				pending++
			}
		}
	}
	if pending == 0 {
		t.Fatalf("no leaf reports the pending reload: %+v", st.Devices)
	}

	// Reloaded: the retry deploys, the job is Ready, the condition is met.
	sw.set("routing-mode-applied.txt")
	if err := admin.Do(ctx, "POST", "/v1/fabric/deploy", nil, &st); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	var after api.FabricStatus // fresh: omitted fields must not keep old values
	if err := admin.Do(ctx, "GET", "/v1/fabric/status", nil, &after); err != nil {
		t.Fatal(err)
	}
	for _, d := range after.Devices {
		for _, cd := range d.Conditions {
			if !cd.OK || d.Error != "" {
				t.Errorf("device %s after the reload: error %q, condition %+v", d.Name, d.Error, cd)
			}
		}
	}
}
