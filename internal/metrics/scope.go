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
	// Workspace, when set, keeps only series whose workspace label is
	// this workspace (a member token sees its own workspace, not its
	// tenant's totals).
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

// sees: the tenant label must be present and the scope's; with a
// workspace in the scope, the workspace label too (a member sees nothing
// of its tenant's other workspaces, their sums included).
func (sc Scope) sees(m *dto.Metric) bool {
	tenantOK, wsOK := false, sc.Workspace == ""
	for _, l := range m.Label {
		switch l.GetName() {
		case LabelTenant:
			if l.GetValue() != sc.Tenant {
				return false
			}
			tenantOK = true
		case LabelWorkspace:
			if sc.Workspace != "" {
				if l.GetValue() != sc.Workspace {
					return false
				}
				wsOK = true
			}
		}
	}
	return tenantOK && wsOK
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
