package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
)

// flaky wraps the file driver and fails the devices in fail.
type flaky struct {
	deploy.File
	mu   sync.Mutex
	fail map[string]bool
}

func (f *flaky) Apply(ctx context.Context, d deploy.Device) error {
	f.mu.Lock()
	bad := f.fail[d.Name]
	f.mu.Unlock()
	if bad {
		return fmt.Errorf("device %s: connection refused", d.Name)
	}
	return f.File.Apply(ctx, d)
}

func (f *flaky) set(device string, bad bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[device] = bad
}

// TestNetworkGate: a placed job is Ready only once the fabric revision
// carrying its tenant VRF, ports and group is deployed on every leaf its
// GPUs use; a failed device names itself and holds back only the jobs on
// it; configs, revisions and diffs are served.
func TestNetworkGate(t *testing.T) {
	dir := t.TempDir()
	drv := &flaky{File: deploy.File{Dir: dir}, fail: map[string]bool{"s1-leaf7": true}}
	c := startTuned(t, func(cfg *server.Config) { cfg.Driver = drv })
	admin := c.Client(0)
	seed(t, admin) // acme: server isolation + segmentation; globex: GPU isolation, vlan-aware

	// acme's job on whole servers touches all 8 leaves, s1-leaf7 among
	// them: it waits, and says for what.
	j1, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waiting := waitJob(t, admin, j1.ID, "waiting on s1-leaf7", func(j *domain.Job) bool {
		return j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "s1-leaf7 (deploy failed")
	})
	if waiting.NetworkRev == 0 {
		t.Fatalf("placed job without a network revision: %+v", waiting)
	}
	// globex's 1-GPU job uses GPU 0, cabled to s1-leaf0 only: not held back.
	j2, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j2.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	if j, _ := admin.Job(ctxT(t), j1.ID); j.State != domain.JobPlaced {
		t.Fatalf("job %d is %s while s1-leaf7 failed, want Placed", j.ID, j.State)
	}
	var st state.FabricStatus
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Devices {
		if (d.Name == "s1-leaf7") != (d.Error != "") {
			t.Fatalf("device %+v: only s1-leaf7 may have failed", d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s1-leaf7")); err == nil {
		t.Fatal("the failed device has files")
	}
	conf, err := os.ReadFile(filepath.Join(dir, "s1-leaf0", "frr.conf"))
	if err != nil || !strings.Contains(string(conf), "\nvrf acme\n") || !strings.Contains(string(conf), "\nvrf globex\n") {
		t.Fatalf("s1-leaf0/frr.conf lacks the tenant VRFs (%v):\n%.600s", err, conf)
	}

	// The device comes back: the retry deploys it, the job is Ready.
	drv.set("s1-leaf7", false)
	if err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, &st); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })

	// Revisions, configs and diffs.
	var revs []state.RevisionInfo
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/revisions", nil, &revs); err != nil || len(revs) < 2 {
		t.Fatalf("revisions %v (%v): want at least 2", revs, err)
	}
	var cfgs []render.DeviceFiles
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/configs?device=s1-leaf0&nos=junos", nil, &cfgs); err != nil || len(cfgs) != 1 || !strings.Contains(cfgs[0].Files[0].Content, "set routing-instances") {
		t.Fatalf("junos rendering of s1-leaf0 (%v): %+v", err, cfgs)
	}
	var diff api.FabricDiff
	if err := admin.Do(ctxT(t), "GET", fmt.Sprintf("/v1/fabric/diff?from=%d&to=%d", revs[0].Rev, revs[len(revs)-1].Rev), nil, &diff); err != nil || len(diff.Devices) == 0 {
		t.Fatalf("diff (%v): %+v", err, diff)
	}
	for name, path := range map[string]string{
		"bad rev":       "/v1/fabric/configs?rev=x",
		"unknown rev":   "/v1/fabric/configs?rev=999",
		"bad nos":       "/v1/fabric/configs?nos=ios",
		"nos with rev":  "/v1/fabric/configs?nos=eos&rev=1",
		"from after to": "/v1/fabric/diff?from=3&to=2",
	} {
		if err := admin.Do(ctxT(t), "GET", path, nil, &cfgs); err == nil {
			t.Errorf("%s: %s answered, want an error", name, path)
		}
	}

	// The verifier agrees that nothing leaks, and says who reaches whom:
	// acme's job reaches its own ports only, globex's job nothing of acme.
	var v api.FabricVerify
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/verify?matrix=true", nil, &v); err != nil || !v.OK {
		t.Fatalf("verify (%v):\n%s", err, v.Text)
	}
	if len(v.Reachability) == 0 {
		t.Fatal("verify ?matrix=true returned no matrix")
	}

	// The job ends: its group and ports leave the fabric in a new revision.
	before := len(revs)
	if _, err := admin.CancelJob(ctxT(t), j1.ID); err != nil {
		t.Fatal(err)
	}
	deadline := ctxT(t)
	for {
		if err := admin.Do(deadline, "GET", "/v1/fabric/revisions", nil, &revs); err != nil {
			t.Fatal(err)
		}
		if len(revs) > before {
			break
		}
		select {
		case <-deadline.Done():
			t.Fatal("no revision after the job ended")
		default:
		}
	}
	if err := admin.Do(ctxT(t), "GET", "/v1/fabric/diff", nil, &diff); err != nil || len(diff.Devices) == 0 || !strings.Contains(diff.Devices[0].Text, "-") {
		t.Fatalf("diff of the job's end (%v): %+v", err, diff)
	}
}

// TestNoDriverNoGate: without a driver placed jobs are Ready at once and
// the fabric API says why it cannot deploy.
func TestNoDriverNoGate(t *testing.T) {
	c := startTuned(t, func(cfg *server.Config) { cfg.FabricDriver = "none" })
	admin := c.Client(0)
	seed(t, admin)
	j, _ := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady && j.NetworkRev == 0 })
	var st state.FabricStatus
	err := admin.Do(ctxT(t), "POST", "/v1/fabric/deploy", nil, &st)
	if de, ok := err.(*domain.Error); !ok || de.Code != domain.CodeFailedPrecondition {
		t.Fatalf("deploy without a driver: %v, want failed_precondition", err)
	}
}
