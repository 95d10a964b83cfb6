package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// Tenants and workspaces.

type tenantsView struct {
	Tenants []tenantView
	Window  string
	Windows []string
	// Buckets label the usage chart's columns (their start, UTC).
	From, To string
}

type tenantView struct {
	Name, Class          string
	Isolation, Network   string
	Quota                *domain.TenantQuota
	Workspaces           []wsView
	Usage                []float64 // average GPU-equivalents held per bucket
	Bars                 []usageBar
	Peak                 float64
	Guaranteed           int
	Used, Borrowed, Lent float64
}

type wsView struct {
	api.WorkspaceUse
	Bar quotaBar
}

// quotaBar is a workspace's bar: a scale of 100 user units.
type quotaBar struct {
	Guaranteed, Within, Borrowed, Lent, LentX, BorrowedX float64
}

type usageBar struct {
	X, H, Y float64
	Label   string
}

func barOf(u api.WorkspaceUse) quotaBar {
	scale := max(float64(u.Guaranteed+u.BorrowLimit), u.Used, 1)
	k := 100 / scale
	within := u.Used - u.Borrowed
	return quotaBar{Guaranteed: float64(u.Guaranteed) * k, Within: within * k,
		BorrowedX: float64(u.Guaranteed) * k, Borrowed: u.Borrowed * k,
		LentX: within * k, Lent: u.Lent * k}
}

var windows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

const buckets = 12

func (c *Console) tenantsData(r *http.Request, q *request) (string, any, error) {
	ctx := r.Context()
	win := r.URL.Query().Get("window")
	if _, ok := windows[win]; !ok {
		win = "1h"
	}
	var tenants []domain.Tenant
	if err := q.api.get(ctx, "/v1/tenants", &tenants); err != nil {
		return "", nil, err
	}
	// Only the workspaces are read (every page holds them all): one job
	// is the smallest page.
	var queue api.Queue
	if err := q.api.get(ctx, "/v1/queue?limit=1", &queue); err != nil {
		return "", nil, err
	}
	col := colours(tenants)
	v := &tenantsView{Window: win, Windows: []string{"1h", "24h", "7d"}}
	idx := map[string]int{}
	for _, t := range tenants {
		idx[t.Name] = len(v.Tenants)
		v.Tenants = append(v.Tenants, tenantView{Name: t.Name, Class: col[t.Name], Isolation: string(t.Isolation), Network: string(t.Network), Quota: t.Quota, Usage: make([]float64, buckets)})
	}
	for _, w := range queue.Workspaces {
		i, ok := idx[w.Tenant]
		if !ok {
			continue
		}
		t := &v.Tenants[i]
		t.Workspaces = append(t.Workspaces, wsView{WorkspaceUse: w, Bar: barOf(w)})
		t.Guaranteed += w.Guaranteed
		t.Used += w.Used
		t.Borrowed += w.Borrowed
		t.Lent += w.Lent
	}
	// Usage over time: one report per bucket, as `jobfabric usage
	// --since --until` would ask.
	now := c.cfg.Clock.Now().UTC().Truncate(time.Second)
	step := windows[win] / buckets
	start := now.Add(-windows[win])
	v.From, v.To = start.Format("2006-01-02 15:04"), now.Format("2006-01-02 15:04 UTC")
	for b := range buckets {
		from, until := start.Add(time.Duration(b)*step), start.Add(time.Duration(b+1)*step)
		path := "/v1/usage?by=tenant&since=" + url.QueryEscape(from.Format(time.RFC3339)) + "&until=" + url.QueryEscape(until.Format(time.RFC3339))
		u, err := getUsage(ctx, q.api, path)
		if err != nil {
			return "", nil, err
		}
		for _, row := range u.Rows {
			if i, ok := idx[row.Tenant]; ok {
				v.Tenants[i].Usage[b] = row.GPUEquivalentHours / step.Hours()
			}
		}
	}
	for i := range v.Tenants {
		t := &v.Tenants[i]
		t.Peak = slices.Max(t.Usage)
		scale := max(t.Peak, 1)
		for b, x := range t.Usage {
			h := x / scale * 40
			t.Bars = append(t.Bars, usageBar{X: float64(b) * 10, H: h, Y: 40 - h,
				Label: fmt.Sprintf("%s: %.1f GPUs on average", start.Add(time.Duration(b)*step).Format("Jan 2 15:04"), x)})
		}
	}
	return "Tenants and workspaces", v, nil
}

// Queue.

type queueView struct {
	OrderedAt  time.Time
	Pending    []domain.Job
	Running    []jobRow
	Workspaces []string
	CanDrain   bool
}

func (c *Console) queueData(r *http.Request, q *request) (string, any, error) {
	ctx := r.Context()
	queue, err := getQueue(ctx, q.api)
	if err != nil {
		return "", nil, err
	}
	running, err := getAll[domain.Job](ctx, q.api, "/v1/jobs?state="+liveStates, false)
	if err != nil {
		return "", nil, err
	}
	v := &queueView{OrderedAt: queue.OrderedAt, Pending: queue.Pending}
	for _, w := range queue.Workspaces {
		v.Workspaces = append(v.Workspaces, w.Tenant+"/"+w.Workspace)
	}
	for i := range running {
		j := &running[i]
		v.Running = append(v.Running, jobRow{ID: j.ID, Name: j.Name, Tenant: j.Tenant, Workspace: j.Workspace, State: j.State, GPUs: asks(j), Servers: placementText(j.Placement)})
	}
	return "Queue", v, nil
}

func placementText(ps []domain.Placement) string {
	var parts []string
	for _, p := range ps {
		s := p.Server + " gpu " + joinInts(p.GPUs)
		for _, m := range p.MIG {
			s += fmt.Sprintf(" [%s@%d]", m.Profile, m.Start)
		}
		if p.Share > 0 {
			s += fmt.Sprintf(" (%g)", p.Share)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Job.

type jobView struct {
	Job       domain.Job
	Asks      string
	Health    *api.JobHealth
	HealthErr string
	Bindings  []binding.Binding
	BindErr   string
	Events    []domain.Event
	Domains   []string
	Leaves    []string
}

func (c *Console) jobData(r *http.Request, q *request) (string, any, error) {
	ctx := r.Context()
	id, err := jobID(r)
	if err != nil {
		return "", nil, err
	}
	v := &jobView{}
	if err := q.api.get(ctx, fmt.Sprintf("/v1/jobs/%d", id), &v.Job); err != nil {
		return "", nil, err
	}
	j := &v.Job
	v.Asks = asks(j)
	seen := map[string]bool{}
	for _, p := range j.Placement {
		if p.NVLinkDomain != "" && !seen["d"+p.NVLinkDomain] {
			seen["d"+p.NVLinkDomain] = true
			v.Domains = append(v.Domains, p.NVLinkDomain)
		}
		for _, l := range p.Leaves {
			if !seen["l"+l] {
				seen["l"+l] = true
				v.Leaves = append(v.Leaves, l)
			}
		}
	}
	if j.State.HoldsGPUs() {
		var h api.JobHealth
		if err := q.api.get(ctx, fmt.Sprintf("/v1/jobs/%d/health", id), &h); err != nil {
			v.HealthErr = describe(err)
		} else {
			v.Health = &h
		}
		// The binding of each server (a few: a gang's first eight).
		for _, p := range j.Placement[:min(len(j.Placement), 8)] {
			var b binding.Binding
			if err := q.api.get(ctx, fmt.Sprintf("/v1/jobs/%d/binding?node=%s", id, url.QueryEscape(p.Server)), &b); err != nil {
				v.BindErr = describe(err)
				break
			}
			v.Bindings = append(v.Bindings, b)
		}
	}
	path := fmt.Sprintf("/v1/events?tenant=%s&workspace=%s&since=%s", url.QueryEscape(j.Tenant), url.QueryEscape(j.Workspace), url.QueryEscape(j.SubmittedAt.Add(-time.Second).UTC().Format(time.RFC3339)))
	evs, err := getAll[domain.Event](ctx, q.api, path, true)
	if err != nil {
		return "", nil, err
	}
	obj := fmt.Sprintf("job/%d", id)
	for _, e := range evs {
		if e.Object == obj {
			v.Events = append(v.Events, e)
		}
	}
	title := fmt.Sprintf("Job %d", id)
	if j.Name != "" {
		title += " " + j.Name
	}
	return title, v, nil
}

// Fabric.

type fabricView struct {
	Status    *api.FabricStatus
	StatusErr string
	Revisions []api.RevisionInfo
	Diff      *api.FabricDiff
	DiffErr   string
	Verify    *api.FabricVerify
	VerifyErr string
	Hotspots  *api.Hotspots
	HotErr    string
	InSync    int
}

func (c *Console) fabricData(r *http.Request, q *request) (string, any, error) {
	ctx := r.Context()
	v := &fabricView{}
	// A tenant's token reads only the hotspots on its own jobs' paths;
	// the rest is the platform's, and says so.
	var st api.FabricStatus
	if err := q.api.get(ctx, "/v1/fabric/status", &st); err != nil {
		v.StatusErr = describe(err)
	} else {
		v.Status = &st
		for _, d := range st.Devices {
			if d.Deployed == d.DesiredHash && d.Error == "" {
				v.InSync++
			}
		}
		var revs []api.RevisionInfo
		if err := q.api.get(ctx, "/v1/fabric/revisions", &revs); err == nil {
			slices.Reverse(revs)
			v.Revisions = revs[:min(len(revs), 8)]
		}
		var d api.FabricDiff
		if st.Revision > 1 {
			if err := q.api.get(ctx, "/v1/fabric/diff", &d); err != nil {
				v.DiffErr = describe(err)
			} else {
				v.Diff = &d
			}
		}
		var vr api.FabricVerify
		if err := q.api.get(ctx, "/v1/fabric/verify", &vr); err != nil {
			v.VerifyErr = describe(err)
		} else {
			v.Verify = &vr
		}
	}
	var h api.Hotspots
	if err := q.api.get(ctx, "/v1/fabric/hotspots?limit=20", &h); err != nil {
		v.HotErr = describe(err)
	} else {
		v.Hotspots = &h
	}
	return "Fabric", v, nil
}
