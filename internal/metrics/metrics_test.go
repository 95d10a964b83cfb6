package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func gatherScoped(t *testing.T, m *Metrics, sc Scope) map[string][]*dto.Metric {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, f := range Filter(fams, sc) {
		out[f.GetName()] = f.Metric
	}
	return out
}

func labels(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.Label {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return b.String()
}

func TestFilterScopes(t *testing.T) {
	m := New()
	m.Placements.WithLabelValues("acme", "research").Inc()
	m.Placements.WithLabelValues("acme", "prod").Inc()
	m.Placements.WithLabelValues("globex", "infer").Inc()
	m.Preemptions.WithLabelValues("globex", "infer", "reclaimed").Inc()
	m.Requests.WithLabelValues("GET", "/v1/jobs", "200").Inc()
	// A collector added through the hook with a tenant label only.
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobfabric_job_path_healthy", Help: "test"}, []string{LabelTenant, "job"})
	g.WithLabelValues("acme", "7").Set(1)
	g.WithLabelValues("globex", "8").Set(0)
	if err := m.Register(g); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		scope Scope
		want  map[string][]string // family -> label strings, in order
	}{
		{"tenant acme", Scope{Tenant: "acme"}, map[string][]string{
			"jobfabric_scheduler_placements_total": {"tenant=acme,workspace=prod,", "tenant=acme,workspace=research,"},
			"jobfabric_job_path_healthy":           {"job=7,tenant=acme,"},
		}},
		{"member acme/research", Scope{Tenant: "acme", Workspace: "research"}, map[string][]string{
			"jobfabric_scheduler_placements_total": {"tenant=acme,workspace=research,"},
		}},
		{"tenant globex", Scope{Tenant: "globex"}, map[string][]string{
			"jobfabric_scheduler_placements_total":  {"tenant=globex,workspace=infer,"},
			"jobfabric_scheduler_preemptions_total": {"kind=reclaimed,tenant=globex,workspace=infer,"},
			"jobfabric_job_path_healthy":            {"job=8,tenant=globex,"},
		}},
		{"no tenant (a node agent)", Scope{}, map[string][]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := gatherScoped(t, m, c.scope)
			if len(got) != len(c.want) {
				t.Errorf("families %d, want %d: %v", len(got), len(c.want), got)
			}
			for fam, want := range c.want {
				var ls []string
				for _, s := range got[fam] {
					ls = append(ls, labels(s))
				}
				if strings.Join(ls, " ") != strings.Join(want, " ") {
					t.Errorf("%s: %v, want %v", fam, ls, want)
				}
			}
		})
	}
	all := gatherScoped(t, m, Scope{All: true})
	for _, fam := range []string{"jobfabric_http_requests_total", "go_goroutines", "process_cpu_seconds_total", "jobfabric_job_path_healthy"} {
		if all[fam] == nil {
			t.Errorf("admin scope lacks %s", fam)
		}
	}
}

// Registries are per server: two servers in one process count apart.
func TestRegistriesApart(t *testing.T) {
	a, b := New(), New()
	a.Placements.WithLabelValues("acme", "research").Inc()
	if n := testutil.CollectAndCount(b.Placements); n != 0 {
		t.Fatalf("a second registry sees %d placement series of the first", n)
	}
}

func TestReasonLabelsBounded(t *testing.T) {
	for code, want := range map[string]string{"": "new", "capacity": "capacity", "workspace_quota": "workspace_quota",
		"job 42 waits for acme": "other"} {
		if got := PendingReason(code); got != want {
			t.Errorf("PendingReason(%q) = %q, want %q", code, got, want)
		}
	}
	for code, want := range map[string]string{"reclaimed": "reclaimed", "drained": "drained", "x": "other"} {
		if got := PreemptionKind(code); got != want {
			t.Errorf("PreemptionKind(%q) = %q, want %q", code, got, want)
		}
	}
}
