package server

import (
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/metrics"
	"github.com/jobfabric/jobfabric/internal/state"
)

// Metrics is the server's registry: Register adds a collector (per-job
// path health); see internal/metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// metricsScope is who reads /metrics what: admins and platform runtimes
// every series; a tenant-scoped token only the series labelled with its
// tenant (a member's, with its workspace); a node agent's token (no
// tenant) nothing but the empty answer.
func metricsScope(p *principal) metrics.Scope {
	if p.platform() {
		return metrics.Scope{All: true}
	}
	sc := metrics.Scope{Tenant: p.tok.Tenant}
	switch p.tok.Role {
	case domain.RoleAdmin, domain.RoleTenantAdmin, domain.RoleRuntime:
	default:
		sc.Workspace = p.tok.Workspace
	}
	return sc
}

// metricsHandler serves GET /metrics to any valid token, each seeing its
// scope; no token, 401. Each member answers for itself (not forwarded):
// scrape every member.
func (s *Server) metricsHandler() http.Handler {
	h := s.metrics.Handler(func(r *http.Request) metrics.Scope {
		return metricsScope(principalOf(r))
	})
	return s.authed("/metrics", func(w http.ResponseWriter, r *http.Request, p *principal) error {
		h.ServeHTTP(w, r)
		return nil
	})
}

// pprofHandler mounts net/http/pprof's handlers for admins only: profiles
// show memory and goroutines of the whole process (tokens' hashes, every
// tenant's objects).
func (s *Server) pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return s.authed("/debug/pprof/", func(w http.ResponseWriter, r *http.Request, p *principal) error {
		if !p.admin() {
			return p.denied("read the profiler")
		}
		mux.ServeHTTP(w, r)
		return nil
	})
}

type principalKey struct{}

func principalOf(r *http.Request) *principal {
	p, _ := r.Context().Value(principalKey{}).(*principal)
	return p
}

// authed wraps a handler that is not an API route (no JSON, not in the
// OpenAPI document, answered locally) with authentication, the request
// metrics and the request log.
func (s *Server) authed(pattern string, h func(w http.ResponseWriter, r *http.Request, p *principal) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := s.track(w, r, pattern)
		defer rec.done()
		if s.guard.authRefused(rec, r) {
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.guard.authFailed(r)
			writeError(rec, err)
			return
		}
		rec.tokenID = p.tok.ID
		r = r.WithContext(contextWith(r, principalKey{}, p))
		if err := h(rec, r, p); err != nil {
			writeError(rec, err)
		}
	})
}

// stateCollector reads the replicated state at scrape time: pending jobs
// by workspace and reason, quota use and the fabric's revisions. Nothing
// is cached, so a scrape sees the state as of the scrape (on any member).
type stateCollector struct{ fsm *state.FSM }

var (
	descPending = prometheus.NewDesc("jobfabric_scheduler_pending_jobs",
		"Pending jobs by tenant, workspace and reason code (fixed set; unknown codes count as other, not yet scheduled as new).",
		[]string{metrics.LabelTenant, metrics.LabelWorkspace, "reason"}, nil)
	descWsUse = prometheus.NewDesc("jobfabric_workspace_quota_use_gpus",
		"GPU-equivalents by workspace: guaranteed (held within its guarantee), borrowed (held above it), lent (its idle guarantee that other workspaces' borrowing holds now).",
		[]string{metrics.LabelTenant, metrics.LabelWorkspace, "use"}, nil)
	descWsQuota = prometheus.NewDesc("jobfabric_workspace_quota_gpus",
		"A workspace's quota in GPUs: guaranteed, borrow (borrow limit), lend (lend limit).",
		[]string{metrics.LabelTenant, metrics.LabelWorkspace, "limit"}, nil)
	descTenantUse = prometheus.NewDesc("jobfabric_tenant_quota_use_gpus",
		"GPU-equivalents by tenant (the sum of its workspaces'): guaranteed, borrowed, lent.",
		[]string{metrics.LabelTenant, "use"}, nil)
	descPathHealth = prometheus.NewDesc("jobfabric_jobs_path_health",
		"Live jobs by tenant, workspace and the committed verdict of their path (healthy, unknown, congested, lossy, link_errors, gpu_errors; none before the first judgment).",
		[]string{metrics.LabelTenant, metrics.LabelWorkspace, "verdict"}, nil)
	descJobUnhealthy = prometheus.NewDesc("jobfabric_job_path_unhealthy",
		"1 for each live job whose committed path verdict is a fault, labelled with it (only faulty jobs have a series: the count is bounded by the live jobs, and is small while the fabric is well).",
		[]string{metrics.LabelTenant, metrics.LabelWorkspace, "job", "verdict"}, nil)
	descRecords = prometheus.NewDesc("jobfabric_state_records",
		"Records the replicated state holds, by kind: live_jobs, ended_jobs, events, usage_records (the usage archive of jobs retention removed). Retention keeps all but live_jobs bounded.",
		[]string{"kind"}, nil)
	descRevision = prometheus.NewDesc("jobfabric_fabric_revision",
		"The latest committed fabric revision.", nil, nil)
	descDeviceRev = prometheus.NewDesc("jobfabric_fabric_device_deployed_revision",
		"The fabric revision deployed on a device.", []string{"device"}, nil)
	descDeviceSync = prometheus.NewDesc("jobfabric_fabric_device_in_sync",
		"1 when the device runs its desired configuration, 0 when a deploy is due or failed.", []string{"device"}, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descWsUse, descWsQuota, descTenantUse, descPathHealth, descJobUnhealthy, descRecords, descRevision, descDeviceRev, descDeviceSync} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	var pending map[[3]string]int
	var use []workspaceUse
	var paths map[[3]string]int
	var unhealthy [][4]string
	c.fsm.Read(func(v state.View) {
		pending = pendingByReason(v)
		use = quotaUse(v)
		paths, unhealthy = pathHealthOf(v)
	})
	for k, n := range paths {
		ch <- prometheus.MustNewConstMetric(descPathHealth, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	for _, k := range unhealthy {
		ch <- prometheus.MustNewConstMetric(descJobUnhealthy, prometheus.GaugeValue, 1, k[0], k[1], k[2], k[3])
	}
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	tenants := map[string]*[3]float64{}
	for _, u := range use {
		vals := [3]float64{u.guaranteed, u.borrowed, u.lent}
		for i, name := range []string{"guaranteed", "borrowed", "lent"} {
			ch <- prometheus.MustNewConstMetric(descWsUse, prometheus.GaugeValue, vals[i], u.w.Tenant, u.w.Name, name)
		}
		for name, q := range map[string]int{"guaranteed": u.w.Guaranteed, "borrow": u.w.BorrowLimit, "lend": u.w.LendLimit} {
			ch <- prometheus.MustNewConstMetric(descWsQuota, prometheus.GaugeValue, float64(q), u.w.Tenant, u.w.Name, name)
		}
		t := tenants[u.w.Tenant]
		if t == nil {
			t = &[3]float64{}
			tenants[u.w.Tenant] = t
		}
		for i := range vals {
			t[i] += vals[i]
		}
	}
	for name, t := range tenants {
		for i, u := range []string{"guaranteed", "borrowed", "lent"} {
			ch <- prometheus.MustNewConstMetric(descTenantUse, prometheus.GaugeValue, t[i], name, u)
		}
	}
	sz := c.fsm.Sizes()
	for kind, n := range map[string]int{"live_jobs": sz.LiveJobs, "ended_jobs": sz.EndedJobs, "events": sz.Events, "usage_records": sz.UsageRecords} {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.GaugeValue, float64(n), kind)
	}
	st := c.fsm.FabricStatus()
	ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, float64(st.Revision))
	for _, d := range st.Devices {
		ch <- prometheus.MustNewConstMetric(descDeviceRev, prometheus.GaugeValue, float64(d.DeployedRev), d.Name)
		in := 0.0
		if d.Deployed == d.DesiredHash && d.Error == "" {
			in = 1
		}
		ch <- prometheus.MustNewConstMetric(descDeviceSync, prometheus.GaugeValue, in, d.Name)
	}
}

// pathHealthOf counts live jobs by their committed path verdict and lists
// the faulty ones (tenant, workspace, job ID, verdict), from the tallies
// apply keeps (state.WorkspaceTally): what the scrape holds the read lock
// for is the workspaces with live jobs and the faulty jobs, not a walk of
// every live job.
func pathHealthOf(v state.View) (map[[3]string]int, [][4]string) {
	counts := map[[3]string]int{}
	var faulty [][4]string
	for t := range v.Tallies() {
		for verdict, n := range t.Paths {
			counts[[3]string{t.Tenant, t.Workspace, string(verdict)}] = n
		}
		for id, verdict := range t.Faulty {
			faulty = append(faulty, [4]string{t.Tenant, t.Workspace, strconv.FormatUint(id, 10), string(verdict)})
		}
	}
	return counts, faulty
}

// pendingByReason counts pending jobs by tenant, workspace and reason.
func pendingByReason(v state.View) map[[3]string]int {
	out := map[[3]string]int{}
	for t := range v.Tallies() {
		for code, n := range t.PendingBy {
			out[[3]string{t.Tenant, t.Workspace, metrics.PendingReason(code)}] += n
		}
	}
	return out
}

// workspaceUse is one workspace's held capacity, in GPU-equivalents.
type workspaceUse struct {
	w                          *domain.Workspace
	guaranteed, borrowed, lent float64
}

// quotaUse splits what every workspace holds into guaranteed and borrowed
// use, and charges the borrowing to lenders: borrowing beyond the capacity
// nobody is guaranteed comes out of the idle guarantees others may lend
// (within their lend limits), shared among them in proportion to what
// each may lend. It is an account of now, not the scheduler's decision.
func quotaUse(v state.View) []workspaceUse {
	held := map[string]int{}
	for t := range v.Tallies() {
		held[domain.Ref(t.Tenant, t.Workspace)] = t.Held
	}
	capacity := 0
	if t := v.Topology(); t != nil {
		for _, srv := range t.Servers() {
			capacity += srv.GPUs * domain.UnitsPerGPU
		}
	}
	var out []workspaceUse
	reserved, borrowed, lendable := 0, 0, 0
	lend := map[string]int{}
	for w := range v.Workspaces() {
		g, h := w.Guaranteed*domain.UnitsPerGPU, held[w.Ref()]
		reserved += g
		borrowed += max(0, h-g)
		if idle := g - h; idle > 0 {
			lend[w.Ref()] = min(idle, w.LendLimit*domain.UnitsPerGPU)
			lendable += lend[w.Ref()]
		}
		out = append(out, workspaceUse{w: w, guaranteed: gpus(min(h, g)), borrowed: gpus(max(0, h-g))})
	}
	fromLenders := min(lendable, max(0, borrowed-max(0, capacity-reserved)))
	if fromLenders > 0 {
		for i := range out {
			out[i].lent = gpus(fromLenders) * float64(lend[out[i].w.Ref()]) / float64(lendable)
		}
	}
	return out
}

func gpus(units int) float64 { return float64(units) / domain.UnitsPerGPU }
