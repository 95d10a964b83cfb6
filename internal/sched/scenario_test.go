package sched

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/datadriven"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestScenarios runs the scheduling scenarios of testdata/scenarios. A file
// builds worlds and schedules them:
//
//	world stripes=1 servers=2 [gpus=8] [nvlink=16] [a100=N]   the input lines build it:
//	  tenant NAME [iso=gpu|server] [sites=(a,b)] [quota=(g,b,l)]
//	  ws TENANT/NAME [guaranteed=N] [borrow=N] [lend=N] [weight=N] [modelquota=(MODEL,g,b,l)]
//	  job TENANT/WS [gpus=N] [options]             a pending job
//	  running TENANT/WS SERVER:GPUS... [options]   a job holding those GPUs
//	  node SERVER [cordoned] [draining] [unhealthy]
//	  ended TENANT/WS gpus=N from=7h to=5h         usage history
//	add                                             more jobs, same lines
//	schedule [commit]                               run one cycle; commit applies its placements
//	usage                                           each workspace's units in use
//
// a100=N makes the first N servers A100-80GB and the rest H100-80GB.
// Job options: prio, pernode, model, models=(a,b), expect (seconds), driver, mindriver, mig+count, share,
// preemptible, minruntime, timelimit (seconds), topology (+required),
// ago (placed that long before now), preempting (its stop deadline from
// now) with for, backoff (borrow backoff from now).
//
// Rewrite the expected outcomes with
// go test ./internal/sched -run TestScenarios -rewrite.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		var w *domaintest.World
		datadriven.RunTest(t, path, func(t *testing.T, c *datadriven.Case) string {
			if w == nil && c.Cmd != "world" {
				t.Fatalf("%s: %s before any world", c.Pos, c.Cmd)
			}
			switch c.Cmd {
			case "world":
				o := topology.GenerateOptions{Stripes: atoi(t, c.Pos, c.Get("stripes", "1")), ServersPerStripe: atoi(t, c.Pos, c.Get("servers", "1")),
					GPUsPerServer: atoi(t, c.Pos, c.Get("gpus", "8")), NVLinkDomainSize: atoi(t, c.Pos, c.Get("nvlink", "0"))}
				w = domaintest.NewWorld(t, o)
				w.Now = now
				if n := atoi(t, c.Pos, c.Get("a100", "0")); n > 0 {
					mixed(w, n)
				}
				buildWorld(t, w, c)
				return ""
			case "add":
				buildWorld(t, w, c)
				return ""
			case "schedule":
				plan := scheduleChecked(t, w)
				if c.Has("commit") {
					commitPlacements(t, w, plan)
				}
				return renderPlan(plan, w.Now)
			case "usage":
				s := snapshotOf(w)
				u := buildUsage(s, buildCluster(s))
				var out []string
				for _, ws := range sortedWorkspaces(s) {
					ref := ws.Tenant + "/" + ws.Name
					out = append(out, fmt.Sprintf("%s: %d units", ref, u.usedOf(ref)))
				}
				return strings.Join(out, "\n")
			}
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
			return ""
		})
	})
}

// mixed makes the first a100 servers of the first fabric A100-80GB and the
// rest H100-80GB.
func mixed(w *domaintest.World, a100 int) {
	srv := w.Topology.Sites[0].Fabrics[0].Servers
	for i := range srv {
		srv[i].GPUModel = "H100-80GB"
		if i < a100 {
			srv[i].GPUModel = "A100-80GB"
		}
	}
}

// snapshotOf is the scheduler's view of a world.
func snapshotOf(w *domaintest.World) *Snapshot {
	return &Snapshot{Topology: w.Topology, Tenants: w.Tenants, Workspaces: w.Workspaces, Jobs: w.Jobs, Nodes: w.Nodes, History: w.History}
}

// scheduleChecked runs one cycle and checks what holds for every plan: the
// same snapshot gives the same plan, and every pending reason explains
// itself.
func scheduleChecked(t *testing.T, w *domaintest.World) *Plan {
	t.Helper()
	plan := Schedule(snapshotOf(w), w.Now)
	if again := Schedule(snapshotOf(w), w.Now); !reflect.DeepEqual(again, plan) {
		t.Error("the same snapshot gave a different plan")
	}
	for id, r := range plan.Pending.All() {
		if r.Message == "" {
			t.Errorf("job %d: pending reason %s without a message", id, r.Code)
		}
	}
	return plan
}

// commitPlacements applies a plan's placements as the leader would, and
// checks that every MIG layout they build is one the GPU can create.
func commitPlacements(t *testing.T, w *domaintest.World, p *Plan) {
	t.Helper()
	for _, pl := range p.Placements {
		w.With(pl.JobID, func(j *domain.Job) { j.State, j.Placement = domain.JobReady, pl.Placement })
	}
	for _, v := range buildCluster(snapshotOf(w)).servers {
		for g, l := range v.mig {
			if len(l) > 0 {
				if err := mig.Validate(mig.Layout{Model: v.s.GPUModel, Instances: l}); err != nil {
					t.Errorf("GPU %d of %s: %v", g, v.s.Name, err)
				}
			}
		}
	}
}

func buildWorld(t *testing.T, w *domaintest.World, c *datadriven.Case) {
	t.Helper()
	for i, l := range strings.Split(c.Input, "\n") {
		if l == "" {
			continue
		}
		pos := fmt.Sprintf("%s (input line %d)", c.Pos, i+1)
		cmd, args, err := datadriven.ParseLine(l)
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		name := args[0].Key
		switch cmd {
		case "tenant":
			b := domaintest.MakeTenant(name)
			if args.Get("iso", "server") == "gpu" {
				b.Isolation(domain.IsolationGPU)
			}
			if args.Has("sites") {
				b.Sites(vals(args, "sites")...)
			}
			if q := vals(args, "quota"); len(q) == 3 {
				b.Quota(atoi(t, pos, q[0]), atoi(t, pos, q[1]), atoi(t, pos, q[2]))
			}
			w.Tenant(b)
		case "ws":
			tn, n, _ := strings.Cut(name, "/")
			b := domaintest.MakeWorkspace(tn, n).Guaranteed(atoi(t, pos, args.Get("guaranteed", "0"))).
				Borrow(atoi(t, pos, args.Get("borrow", "0"))).Lend(atoi(t, pos, args.Get("lend", "0"))).Weight(atoi(t, pos, args.Get("weight", "1")))
			if q := vals(args, "modelquota"); len(q) == 4 {
				b.ModelQuota(q[0], atoi(t, pos, q[1]), atoi(t, pos, q[2]), atoi(t, pos, q[3]))
			}
			w.Workspace(b)
		case "job", "running":
			b := domaintest.MakeJob(name, atoi(t, pos, args.Get("gpus", "0")))
			jobOptions(t, pos, b, args)
			if cmd == "job" {
				w.Pending(b)
			} else {
				var pl []domain.Placement
				for _, a := range args[1:] {
					if srv, gpus, ok := strings.Cut(a.Key, ":"); ok && a.Vals == nil {
						pl = append(pl, domaintest.On(srv, gpuList(t, pos, gpus)...))
					}
				}
				w.Running(b, pl...)
			}
			jobState(t, pos, w, w.Next-1, args)
		case "node":
			w.Node(domain.NodeCondition{Server: name, Cordoned: args.Has("cordoned"), Draining: args.Has("draining"), Unhealthy: args.Has("unhealthy")})
		case "ended":
			w.Ended(domaintest.MakeJob(name, atoi(t, pos, args.Get("gpus", "0"))), dur(t, pos, args.Get("from", "0")), dur(t, pos, args.Get("to", "0")))
		default:
			t.Fatalf("%s: unknown world line %q", pos, cmd)
		}
	}
}

func jobOptions(t *testing.T, pos string, b *domaintest.JobBuilder[domain.JobSpec], args datadriven.Args) {
	b.Priority(atoi(t, pos, args.Get("prio", "0"))).PerNode(atoi(t, pos, args.Get("pernode", "0"))).
		Model(args.Get("model", "")).Driver(args.Get("driver", "")).MinDriver(args.Get("mindriver", "")).
		MinRuntime(int64(atoi(t, pos, args.Get("minruntime", "0")))).TimeLimit(int64(atoi(t, pos, args.Get("timelimit", "0"))))
	if m := vals(args, "models"); len(m) > 0 {
		b.Models(m...)
	}
	if e := args.Get("expect", ""); e != "" {
		b.Expect(int64(atoi(t, pos, e)), int64(atoi(t, pos, args.Get("timelimit", "0"))))
	}
	if args.Has("preemptible") {
		b.Preemptible()
	}
	if p := args.Get("mig", ""); p != "" {
		b.MIG(p, atoi(t, pos, args.Get("count", "1")))
	}
	if s := args.Get("share", ""); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: share %q: %v", pos, s, err)
		}
		b.Share(f)
	}
	if l := args.Get("topology", ""); l != "" {
		b.Topology(l, args.Has("required"))
	}
}

// jobState sets what a job's life so far left on it.
func jobState(t *testing.T, pos string, w *domaintest.World, id uint64, args datadriven.Args) {
	if a := args.Get("ago", ""); a != "" {
		w.PlacedAgo(id, dur(t, pos, a))
	}
	if d := args.Get("preempting", ""); d != "" {
		dl := w.Now.Add(dur(t, pos, d))
		w.With(id, func(j *domain.Job) {
			j.State, j.StopDeadline, j.PreemptedFor = domain.JobPreempting, &dl, uint64(atoi(t, pos, args.Get("for", "0")))
		})
	}
	if d := args.Get("backoff", ""); d != "" {
		b := w.Now.Add(dur(t, pos, d))
		w.With(id, func(j *domain.Job) { j.BorrowNotBefore = &b })
	}
}

// renderPlan writes a plan one line per decision, by job: placements and
// pending reasons, then preemptions, releases and the next due time, all
// times relative to now.
func renderPlan(p *Plan, now time.Time) string {
	lines := map[uint64]string{}
	for _, pl := range p.Placements {
		var whole, frac []string
		for _, x := range pl.Placement {
			whole = append(whole, x.Server+":"+ints(x.GPUs))
			for _, s := range x.MIG {
				frac = append(frac, x.Server+":"+ints([]int{s.GPU})+"/"+s.Profile+"@"+ints([]int{s.Start}))
			}
			if x.Share > 0 {
				frac = append(frac, x.Server+":"+ints(x.GPUs)+"x"+strings.TrimPrefix(fmtFloat(x.Share), "0"))
			}
		}
		if len(frac) > 0 {
			lines[pl.JobID] = strings.Join(frac, " ")
		} else {
			lines[pl.JobID] = strings.Join(whole, " ") + " (" + pl.Level + ")"
		}
	}
	for id, r := range p.Pending.All() {
		lines[id] = "pending " + r.Code + ": " + r.Message
		if v := r.Reservation; v != nil {
			at := "overdue"
			if slices.Contains(v.Basis, domain.BasisUnknown) {
				at = "unknown"
			} else if !v.Start.IsZero() {
				at = "+" + v.Start.Sub(now).String()
			}
			var on []string
			for _, x := range v.Placement {
				on = append(on, x.Server+":"+ints(x.GPUs))
			}
			lines[id] += fmt.Sprintf("\n   reservation %s on %s by %s", at, strings.Join(on, " "), strings.Join(v.Basis, ","))
		}
	}
	ids := make([]uint64, 0, len(lines))
	for id := range lines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf("%d: %s", id, lines[id]))
	}
	pre := slices.Clone(p.Preemptions)
	slices.SortFunc(pre, func(a, b Preemption) int { return int(a.JobID) - int(b.JobID) })
	for _, pr := range pre {
		l := fmt.Sprintf("preempt %d for %d by +%s", pr.JobID, pr.ForJob, pr.Deadline.Sub(now))
		if pr.BorrowBackoff != nil {
			l += fmt.Sprintf(", backoff +%s", pr.BorrowBackoff.Sub(now))
		}
		out = append(out, l+": "+pr.Reason.Code+": "+pr.Reason.Message)
	}
	for _, r := range p.Releases {
		out = append(out, fmt.Sprintf("release %d: %s", r.JobID, r.Cause))
	}
	if !p.Next.IsZero() {
		out = append(out, fmt.Sprintf("next +%s", p.Next.Sub(now)))
	}
	return strings.Join(out, "\n")
}

func vals(args datadriven.Args, key string) []string {
	for _, a := range args {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

// gpuList reads "0-7" or "0,2,5".
func gpuList(t *testing.T, pos, s string) []int {
	if a, b, ok := strings.Cut(s, "-"); ok {
		return domaintest.Seq(atoi(t, pos, a), atoi(t, pos, b)+1)
	}
	var out []int
	for _, x := range strings.Split(s, ",") {
		out = append(out, atoi(t, pos, x))
	}
	return out
}

func atoi(t *testing.T, pos, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %q is no number", pos, s)
	}
	return n
}

func dur(t *testing.T, pos, s string) time.Duration {
	if s == "0" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %q is no duration: %v", pos, s, err)
	}
	return d
}
