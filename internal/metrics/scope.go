package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Scope is what a reader of /metrics may see.
type Scope struct {
	// All: every series (admins, platform runtimes).
	All bool
	// Tenant: only series whose tenant label is this tenant; series
	// without a tenant label (process, API, raft, fabric devices) are
	// platform-wide and not shown. Empty (and not All): nothing.
	Tenant string
	// Workspace, when set, further drops series of the tenant's other
	// workspaces (a member token sees its own workspace).
	Workspace string
}

// Filter returns the families as scope sees them: families with no series
// left are dropped. It never changes fams.
func Filter(fams []*dto.MetricFamily, scope Scope) []*dto.MetricFamily {
	if scope.All {
		return fams
	}
	var out []*dto.MetricFamily
	if scope.Tenant == "" {
		return out
	}
	for _, f := range fams {
		var keep []*dto.Metric
		for _, m := range f.Metric {
			if scope.sees(m) {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			continue
		}
		out = append(out, &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit, Metric: keep})
	}
	return out
}

// sees: the tenant label must be present and the scope's; a workspace
// label, when present and the scope names one, must be the scope's.
func (sc Scope) sees(m *dto.Metric) bool {
	tenantOK := false
	for _, l := range m.Label {
		switch l.GetName() {
		case LabelTenant:
			if l.GetValue() != sc.Tenant {
				return false
			}
			tenantOK = true
		case LabelWorkspace:
			if sc.Workspace != "" && l.GetValue() != sc.Workspace {
				return false
			}
		}
	}
	return tenantOK
}

// Handler serves the registry in the exposition format, as scope(r) sees
// it; scope is asked after the caller is authenticated (by the caller of
// Handler) and returns false to refuse.
func (m *Metrics) Handler(scope func(r *http.Request) Scope) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := scope(r)
		g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			fams, err := m.reg.Gather()
			return Filter(fams, sc), err
		})
		promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}
