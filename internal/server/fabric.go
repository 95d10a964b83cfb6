package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
	"github.com/jobfabric/jobfabric/internal/state"
)

// The leader's fabric loop: after every change of the state (and on a
// tick, which also retries failed devices) it compiles the fabric from
// the state, commits a revision when a device's configuration changed or
// placed jobs wait for their network, deploys what is not deployed yet
// through the driver, and commits each device's outcome. The state machine
// turns Placed jobs Ready once their revision is on their leaves.
//
// A server port never goes from one tenant (or job group) to another in
// one revision: a job whose port still has another membership is held
// out of the revision, which removes the old membership (the port is
// quarantined); once that is deployed on the port's leaf, the next
// revision adds the job. The leaf of the port is the only place where a
// tenant's traffic can enter it, so that deploy is what the second step
// waits for: routes to the port that other leaves keep until the BGP
// withdrawal reaches them lead to the port's leaf in the old tenant's
// VNI, whose VRF there no longer has the port (nor its prefix), and die.

// fabricEnabled: a driver deploys, so placed jobs wait for the network.
func (s *Server) fabricEnabled() bool { return s.driver != nil }

// errStale: the state changed between compile and commit.
var errStale = errors.New("fabric revision stale")

func (s *Server) kickFabric() {
	select {
	case s.fabricKick <- struct{}{}:
	default:
	}
}

func (s *Server) fabricLoop(ctx context.Context) {
	if s.driver == nil {
		return
	}
	interval := s.cfg.ScheduleInterval
	if interval <= 0 {
		interval = defaultScheduleInterval
	}
	// The retry interval is the server's clock; the burst window after a
	// change is real time (see scheduleLoop).
	t, tick := s.clock.NewTicker(interval)
	defer t.Stop()
	retry := true
	var last uint64
	for {
		changed := s.fsm.Changed()
		// Compile only when something the fabric reads changed (a submit
		// does not), or on the tick, which also retries failed devices.
		if s.store.IsLeader() {
			fp := s.fsm.FabricFingerprint()
			// A job held for an L3 VLAN may get one when a quarantine
			// ends, which changes nothing the fingerprint sees: look
			// again on the tick.
			heldForIDs := retry && slices.ContainsFunc(s.fsm.HeldJobs(), func(h state.HeldJob) bool { return h.Why == "l3vlan" })
			_, _, err := s.fabricOnce(ctx, fp != last || heldForIDs, retry)
			switch {
			case errors.Is(err, errStale):
				last = 0 // compile again at the kick
			case err != nil && ctx.Err() == nil:
				s.log.Warn("fabric cycle", "err", err)
				last = 0
			default:
				last = fp
			}
		}
		retry = false
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// Let a burst of changes land, then compile once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		case <-s.fabricKick:
			retry = true
		case <-s.deployDone:
			// A device finished behind the latest revision: deploy the
			// newest to it (failed devices wait for the tick).
		case <-tick:
			retry = true
		}
	}
}

// fabricOnce compiles and commits (when compile: the fingerprint of what
// the fabric reads changed) and starts deploying what is not deployed.
// retry also redeploys devices whose last deploy failed (on the tick, not
// on every change). The compile and its commit have 30s; the deploys run
// on (deployFabric), each with its own deadline: it returns the deploys
// it started and those already in flight that it left queued.
func (s *Server) fabricOnce(ctx context.Context, compile, retry bool) (started, busy []*inflight, err error) {
	s.fabricMu.Lock()
	defer s.fabricMu.Unlock()
	if compile {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.compileFabric(cctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
	}
	started, busy = s.deployFabric(ctx, retry, nil)
	return started, busy, nil
}

// compiled is one compile of the current state.
type compiled struct {
	in      fabric.Input
	intent  *fabric.Intent
	files   []render.DeviceFiles
	idsHash string
	jobs    []uint64
	report  *verify.Report
	// faulty: a test's fault was injected into the intent (files are
	// rendered from it, not from the compiler's cache).
	faulty bool
}

// compileNow compiles the state with the id pools synced at now (the
// revision command carries the same time, so the state machine's sync
// gives the same ids), leaving out the jobs in held. With fc (the fabric
// loop's), the compile is incremental from fc's previous one; without
// (the read-only handlers), it is a full compile.
func (s *Server) compileNow(now time.Time, fc *fabricCompiler, held ...uint64) (*compiled, error) {
	in, idsHash, jobs, err := s.fsm.FabricInput(now, held)
	if err != nil {
		return nil, err
	}
	if in.Topology == nil {
		return nil, nil
	}
	var it *fabric.Intent
	var files []render.DeviceFiles
	if fc != nil && s.cfg.fabricFault != nil {
		// A test's fault: a full compile of our own, broken, rendered in
		// full; the incremental compiler and its caches are left alone.
		if it, err = fabric.Compile(in); err != nil {
			return nil, err
		}
		s.cfg.fabricFault(in, it)
		if files, err = render.RenderIntent(it); err != nil {
			return nil, err
		}
		return &compiled{in: in, intent: it, files: files, idsHash: idsHash, jobs: jobs, faulty: true}, nil
	}
	if fc != nil {
		start := time.Now()
		var inc bool
		if it, inc, err = fc.compile(in); err != nil {
			return nil, err
		}
		// Only what the compile changed is rendered again.
		if files, err = fc.render(it); err != nil {
			return nil, err
		}
		s.log.Debug("fabric compiled", "incremental", inc, "took", time.Since(start), "held", len(held))
	} else {
		if it, err = fabric.Compile(in); err != nil {
			return nil, err
		}
		if files, err = render.RenderIntent(it); err != nil {
			return nil, err
		}
	}
	return &compiled{in: in, intent: it, files: files, idsHash: idsHash, jobs: jobs}, nil
}

// verified is c with its report: the same check as `fabric verify`, run
// once on the compile a revision is made of (not on the compiles that
// find a job to hold, nor on one that commits nothing: at 1,568 leaves it
// is most of a revision's time).
func (c *compiled) verified() *compiled {
	if c.report == nil {
		c.report = verify.Verify(c.in, c.intent)
	}
	return c
}

// compileHeld compiles the state at now, holding out every job that would
// give a port a membership while the port has another one, or while the
// removal of its previous one is not deployed on its leaf yet. It returns
// the compile, the ports whose membership it changes and the held jobs.
//
// The jobs in extra (held for the verifier) are held from the start.
func (s *Server) compileHeld(now time.Time, extra []state.HeldJob) (*compiled, map[string]string, []state.HeldJob, error) {
	members, deployed := s.fsm.PortMembers()
	held := slices.Clone(extra)
	var ids []uint64
	for _, h := range extra {
		ids = append(ids, h.Job)
	}
	// Holding a job can change the membership of a port it shares with
	// another job (a group): check again until nothing more is held.
	for {
		c, err := s.compileNow(now, &s.fabricComp, ids...)
		if leaf, why, ok := l3VLANsExhausted(err); ok {
			// With VRFs where used, a job whose tenant's VRF would come to
			// a leaf with no L3 VLAN free waits (held, saying so), and the
			// rest of the fabric goes on; one job at a time, newest first,
			// so that as many as fit get theirs.
			if w := s.fsm.L3VLANWaiters(leaf, ids); len(w) > 0 {
				ids = append(ids, w[0])
				held = append(held, state.HeldJob{Job: w[0], Why: "l3vlan", Leaf: leaf, Reason: why})
				continue
			}
		}
		if err != nil || c == nil {
			return c, nil, nil, err
		}
		changes := map[string]string{}
		more := false
		for i := range c.intent.Devices {
			d := &c.intent.Devices[i]
			for j := range d.Ports {
				p := &d.Ports[j]
				k, want := state.PortKey(d.Name, p.Name), state.PortMembership(p)
				cur := members[k]
				if want == cur.Member {
					continue
				}
				why := ""
				switch {
				case want == "":
				case cur.Member != "":
					why = "moves"
				case cur.Rev != 0 && deployed[d.Name] < cur.Rev:
					why = "deploying"
				}
				if why == "" {
					changes[k] = want
					continue
				}
				heldOne := false
				for _, js := range p.Jobs {
					id, err := strconv.ParseUint(js, 10, 64)
					if err != nil || slices.Contains(ids, id) {
						continue
					}
					ids = append(ids, id)
					held = append(held, state.HeldJob{Job: id, Port: k, Why: why})
					more, heldOne = true, true
				}
				if !heldOne {
					// No job to hold (cannot happen: every allocation is a
					// job's): say the change, and the state machine refuses
					// the revision rather than the port changing hands.
					changes[k] = want
				}
			}
		}
		if !more {
			return c, changes, held, nil
		}
	}
}

// l3VLANsExhausted reports the leaf whose L3 VLAN pool err says is
// exhausted (pool.State.Allocate's error, field pools.l3vlan/<leaf>),
// and the pool's account of it.
func l3VLANsExhausted(err error) (leaf, why string, ok bool) {
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeFailedPrecondition {
		return "", "", false
	}
	leaf, ok = strings.CutPrefix(de.Field, "pools."+pool.LeafL3VLAN(""))
	return leaf, de.Message, ok && leaf != ""
}

// sameHolds: a and b hold the same jobs, the verifier's for the same
// reasons (a job held for another failure is a revision: its reason
// changes).
func sameHolds(a, b []state.HeldJob) bool {
	verifyHolds := func(hs []state.HeldJob) []state.HeldJob {
		return slices.DeleteFunc(slices.Clone(hs), func(h state.HeldJob) bool { return h.Why != "verify" })
	}
	return sameJobs(a, b) && slices.Equal(verifyHolds(a), verifyHolds(b))
}

// sameJobs: a and b hold the same jobs.
func sameJobs(a, b []state.HeldJob) bool {
	ids := func(hs []state.HeldJob) []uint64 {
		var out []uint64
		for _, h := range hs {
			out = append(out, h.Job)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(ids(a), ids(b))
}

// maxVerifyRounds bounds the compiles of one revision that hold jobs the
// verifier implicates (each round holds every job the failures name that
// can be held; holding more rarely takes more than two).
const maxVerifyRounds = 4

// compileFabric compiles the state and commits a revision when it differs
// from the latest. A revision the verifier fails on never reaches a
// device: the placed jobs the failures implicate (verifyHolds) are held
// out and the state compiled again without them, up to maxVerifyRounds
// times, so other tenants' and jobs' changes go on; what fails still (no
// job to hold: a tenant's shared or imported id, a running job's port) is
// committed for the record as a blocked revision, and the devices stay on
// the latest one that is not blocked (deployFabric).
func (s *Server) compileFabric(ctx context.Context) error {
	now := s.clock.Now()
	var verifyHeld []state.HeldJob
	var first *verify.Report // the first round's report, for the metrics
	for round := 0; ; round++ {
		c, cmd, waiting, err := s.compileRevision(now, verifyHeld)
		if err != nil || c == nil || cmd == nil {
			return err
		}
		c.verified()
		if cmd.Blocked && !c.report.OK() {
			return nil // the blocked revision again: nothing to commit
		}
		cmd.Blocked = false
		if first == nil {
			first = c.report
		}
		if !c.report.OK() && round+1 < maxVerifyRounds {
			if more := verifyHolds(c, cmd.Held, s.placed); len(more) > 0 {
				verifyHeld = append(verifyHeld, more...)
				continue
			}
		}
		return s.commitRevision(ctx, c, cmd, waiting, first)
	}
}

// compileRevision compiles the state at now, holding the jobs in
// verifyHeld, and returns the revision to commit, or a nil cmd when it
// would change nothing. Blocked on the cmd says it would change nothing
// but the latest revision is blocked: commit it only if it verifies.
func (s *Server) compileRevision(now time.Time, verifyHeld []state.HeldJob) (*compiled, *state.FabricRevisionCmd, []uint64, error) {
	c, ports, held, err := s.compileHeld(now, verifyHeld)
	if err != nil || c == nil {
		return c, nil, nil, err
	}
	cur, rev, derr := s.fsm.DeviceConfigs(0)
	if derr != nil {
		return nil, nil, nil, derr
	}
	cmd := &state.FabricRevisionCmd{SyncAt: now, IDsHash: c.idsHash, Changed: map[string]state.DeviceConfig{}, Jobs: c.jobs, InUse: c.intent.InUse(), Ports: ports, Held: held}
	roles := map[string]string{}
	for _, d := range c.intent.Devices {
		roles[d.Name] = string(d.Role)
	}
	seen := map[string]bool{}
	for _, df := range c.files {
		seen[df.Device] = true
		sum, err := s.fabricComp.sum(df)
		if c.faulty {
			// Not the compiler's files: not its cache either.
			files := storedFiles(df.Files)
			sum, err = deviceSum{files: files, hash: state.ConfigHash(df.NOS, files)}, nil
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if cur[df.Device].Hash != sum.hash {
			cmd.Changed[df.Device] = state.DeviceConfig{NOS: df.NOS, Role: roles[df.Device], Files: sum.files, Hash: sum.hash}
		}
	}
	for name := range cur {
		if !seen[name] {
			cmd.Removed = append(cmd.Removed, name)
		}
	}
	slices.Sort(cmd.Removed)
	waiting := slices.DeleteFunc(s.fsm.JobsAwaitingNetwork(), func(id uint64) bool {
		return slices.ContainsFunc(held, func(h state.HeldJob) bool { return h.Job == id })
	})
	if rev != 0 && len(cmd.Changed) == 0 && len(cmd.Removed) == 0 && len(waiting) == 0 && len(ports) == 0 && sameHolds(held, s.fsm.HeldJobs()) {
		if s.fsm.FabricStatus().Blocked != "" {
			// The same configuration as the blocked revision: worth a
			// revision only if it verifies now (a verifier fixed by an
			// upgrade), which unblocks the devices.
			cmd.Blocked = true
			return c, cmd, waiting, nil
		}
		return c, nil, nil, nil // nothing to commit
	}
	return c, cmd, waiting, nil
}

// commitRevision commits cmd, compiled and verified as c; first is the
// report of the first compile, before any job was held for the verifier.
func (s *Server) commitRevision(ctx context.Context, c *compiled, cmd *state.FabricRevisionCmd, waiting []uint64, first *verify.Report) error {
	held := cmd.Held
	// The metrics say whether the compiler produced anything the verifier
	// fails on, held jobs included: that is a bug to look at even when the
	// rest of the fabric goes on.
	s.metrics.VerifyFailures.Set(float64(len(first.Failures())))
	if first.OK() {
		s.metrics.VerifyOK.Set(1)
	} else {
		s.metrics.VerifyOK.Set(0)
	}
	if !c.report.OK() {
		for _, f := range c.report.Failures() {
			cmd.Verify = append(cmd.Verify, f.String())
		}
		if len(cmd.Verify) > 50 {
			cmd.Verify = cmd.Verify[:50]
		}
		cmd.Blocked = true
		s.log.Error("fabric verifier failed: the revision is committed for the record and blocked: no device is given it", "failures", len(c.report.Failures()), "first", cmd.Verify[0])
	}
	cmd.Cause = fmt.Sprintf("%d devices changed, %d jobs waiting for their network", len(cmd.Changed), len(waiting))
	var byPort, byVerify int
	var l3 []string // the pools' accounts, for the admin reading revisions
	var failed []string
	for _, h := range held {
		switch h.Why {
		case "l3vlan":
			if why := h.Leaf + ": " + h.Reason; !slices.Contains(l3, why) {
				l3 = append(l3, why)
			}
		case "verify":
			byVerify++
			if len(failed) < 5 { // the revision keeps each job's failure in Held
				failed = append(failed, fmt.Sprintf("job %d: %s", h.Job, h.Reason))
			}
		default:
			byPort++
		}
	}
	if byPort > 0 {
		cmd.Cause += fmt.Sprintf(", %d held until a port's previous membership is removed", byPort)
	}
	if n := len(held) - byPort - byVerify; n > 0 {
		cmd.Cause += fmt.Sprintf(", %d held for an L3 VLAN (%s)", n, strings.Join(l3, "; "))
	}
	if byVerify > 0 {
		more := ""
		if byVerify > len(failed) {
			more = fmt.Sprintf("; and %d more", byVerify-len(failed))
		}
		cmd.Cause += fmt.Sprintf(", %d held: the verifier failed on their configuration (%s%s)", byVerify, strings.Join(failed, "; "), more)
		s.log.Error("fabric verifier failed: the jobs it implicates are held out of the revision", "jobs", byVerify, "first", failed[0])
	}
	if _, err := s.propose(ctx, state.CmdFabricRevision, "fabric", *cmd); err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeFailedPrecondition {
			s.log.Debug("fabric revision stale; compiling again", "err", err)
			s.kickFabric()
			return errStale
		}
		return err
	}
	s.log.Info("fabric revision committed", "changed", len(cmd.Changed), "removed", len(cmd.Removed), "jobs_waiting", len(waiting), "blocked", cmd.Blocked, "cause", cmd.Cause)
	return nil
}

// placed: the job is Placed, its network on no switch yet.
func (s *Server) placed(id uint64) bool {
	j, ok := s.fsm.Job(id)
	return ok && j.State == domain.JobPlaced
}

// verifyHolds maps the failures of c's report to the jobs they implicate
// that can still be held (placed: no switch runs their network yet) and
// are not in held, one HeldJob each, with the failure as its reason. A
// failure implicates the jobs of the server port it names (the intent
// knows them), or the job it names. Failures of a port's own
// configuration come first: only when none implicates a job that can be
// held are the jobs of ports that reach another tenant's or job's port
// held (the pairs' other end, when it is the cause, is held in the first
// pass, and the reach goes with it), and only when every failure is such
// a reach. Running jobs are never held: their
// network is on the switches already, and a failure that only they
// explain blocks the revision instead.
func verifyHolds(c *compiled, held []state.HeldJob, placed func(job uint64) bool) []state.HeldJob {
	pairwise := func(rule string) bool {
		return rule == verify.RuleReachTenant || rule == verify.RuleReachJobGBP || rule == verify.RuleReachJobACL
	}
	for _, pass := range []bool{false, true} {
		var out []state.HeldJob
		for _, f := range c.report.Failures() {
			if pairwise(f.Rule) != pass {
				continue
			}
			var jobs []string
			port := ""
			if f.Device == "" {
				if id, ok := strings.CutPrefix(f.Object, "job "); ok {
					jobs = []string{id}
				}
			} else if d := c.intent.Device(f.Device); d != nil {
				if p := d.Port(f.Object); p != nil {
					jobs, port = p.Jobs, state.PortKey(d.Name, p.Name)
				}
			}
			for _, js := range jobs {
				id, err := strconv.ParseUint(js, 10, 64)
				if err != nil || slices.ContainsFunc(held, func(h state.HeldJob) bool { return h.Job == id }) ||
					slices.ContainsFunc(out, func(h state.HeldJob) bool { return h.Job == id }) {
					continue
				}
				if !placed(id) {
					continue
				}
				out = append(out, state.HeldJob{Job: id, Port: port, Why: "verify", Rule: f.Rule, Reason: f.String()})
			}
		}
		if len(out) > 0 {
			return out
		}
		if !pass && slices.ContainsFunc(c.report.Failures(), func(f verify.Failure) bool { return !pairwise(f.Rule) }) {
			// A failure no held job explains (a VRF's route target, a
			// running job's port): holding the jobs that reach across it
			// would not make the revision verify.
			break
		}
	}
	return nil
}

func (s *Server) fabricRoutes() []route {
	revQ := param{"rev", "integer", "revision (default: the latest)"}
	devQ := param{"device", "string", "only this device"}
	return []route{
		{method: "GET", path: "/v1/fabric/status", summary: "The latest fabric revision and every device's deployed revision and last error (admin)", access: authed, resp: api.FabricStatus{}, h: s.fabricStatus},
		{method: "GET", path: "/v1/fabric/revisions", summary: "The kept fabric revisions (admin)", access: authed, resp: []api.RevisionInfo{}, h: s.fabricRevisions},
		{method: "GET", path: "/v1/fabric/configs", summary: "Rendered device configurations of a revision, or of the current state for another NOS (admin)", access: authed,
			query: []param{revQ, devQ, {"nos", "string", "render the current intent for this NOS (junos, nxos, eos, sonic, frr) instead of the device's own"}}, resp: []render.DeviceFiles{}, h: s.fabricConfigs},
		{method: "GET", path: "/v1/fabric/diff", summary: "Per-device minimal diff between two revisions (admin)", access: authed,
			query: []param{{"from", "integer", "older revision (default: the one before to)"}, {"to", "integer", "newer revision (default: the latest)"}, devQ}, resp: api.FabricDiff{}, h: s.fabricDiff},
		{method: "GET", path: "/v1/fabric/verify", summary: "Verify the current intent: one VRF per link; no shared VRF, VNI, RD or route target, no foreign RT import; job endpoints in their VRF and group; allocations and port bindings agree; no reachability between tenants, nor between jobs of a segmented tenant (admin)", access: authed,
			query: []param{{"matrix", "boolean", "also return the reachability matrix (leaf/port -> leaf/ports) as the deployed NOSes enforce it"}}, resp: api.FabricVerify{}, h: s.fabricVerify},
		{method: "POST", path: "/v1/fabric/deploy", summary: "Compile and deploy now, retrying failed devices; answers the status after the deploy (admin)", access: authed,
			query: []param{{"override", "string", "deploy the latest revision although the verifier blocked it; the reason, recorded in the events with the admin's name"}}, resp: api.FabricStatus{}, h: s.fabricDeploy},
		{method: "GET", path: "/v1/fabric/options", summary: "The fabric options: where tenants' VRFs are placed, each leaf's L3 VLAN range (admin)", access: authed, resp: api.FabricOptions{}, h: s.getFabricOptions},
		{method: "PUT", path: "/v1/fabric/options", summary: "Replace the fabric options; refused, changing nothing, when a leaf would need more L3 VLANs than its range holds (admin)", access: authed,
			body: api.FabricOptions{}, resp: api.FabricOptions{}, h: s.putFabricOptions},
	}
}

func (s *Server) getFabricOptions(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return apiFabricOptions(s.fsm.FabricOptions()), nil
}

func (s *Server) putFabricOptions(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	var o api.FabricOptions
	if err := decodeJSON(r, &o); err != nil {
		return nil, err
	}
	// The state machine checks them against the pools (propose checks
	// before the log); the fabric loop compiles by them at its next kick.
	v, err := s.propose(r.Context(), state.CmdFabricOptions, p.actor(), state.FabricOptionsSet{Options: state.FabricOptions{
		VRFPlacement: fabric.VRFPlacement(o.VRFPlacement), L3VLANMin: o.L3VLANMin, L3VLANMax: o.L3VLANMax}})
	if err != nil {
		return nil, err
	}
	if so, ok := v.(*state.FabricOptions); ok {
		return apiFabricOptions(*so), nil
	}
	return apiFabricOptions(s.fsm.FabricOptions()), nil
}

func apiFabricOptions(o state.FabricOptions) api.FabricOptions {
	return api.FabricOptions{VRFPlacement: string(o.VRFPlacement), L3VLANMin: o.L3VLANMin, L3VLANMax: o.L3VLANMax}
}

func (s *Server) fabricStatus(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.fabricStatusNow(), nil
}

// fabricStatusNow is the state's fabric status with the leader's last
// revision deploy time.
func (s *Server) fabricStatusNow() *api.FabricStatus {
	st := apiFabricStatus(s.fsm.FabricStatus())
	if l := s.lastRevDeploy.Load(); l != nil {
		c := *l
		st.LastDeploy = &c
	}
	return st
}

func (s *Server) fabricRevisions(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return apiRevisions(s.fsm.FabricRevisions()), nil
}

func uintQuery(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, domain.Invalid(name, "%s %q is not a revision number", name, v)
	}
	return n, nil
}

func (s *Server) fabricConfigs(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	rev, err := uintQuery(r, "rev")
	if err != nil {
		return nil, err
	}
	device, nos := r.URL.Query().Get("device"), r.URL.Query().Get("nos")
	if nos != "" {
		if rev != 0 {
			return nil, domain.Invalid("nos", "nos renders the current state; it does not combine with rev")
		}
		if !slices.Contains(render.NOSes(), nos) {
			return nil, domain.Invalid("nos", "nos %q is not one of %v", nos, render.NOSes())
		}
		c, err := s.compileNow(s.clock.Now(), nil)
		if err != nil {
			return nil, err
		}
		out := []render.DeviceFiles{}
		if c == nil {
			return out, nil
		}
		for i := range c.intent.Devices {
			d := &c.intent.Devices[i]
			if device != "" && d.Name != device {
				continue
			}
			files, err := render.Render(d, nos)
			if err != nil {
				return nil, err
			}
			out = append(out, render.DeviceFiles{Device: d.Name, NOS: nos, Files: files})
		}
		if device != "" && len(out) == 0 {
			return nil, notFoundf("device", device)
		}
		return out, nil
	}
	cfgs, _, derr := s.fsm.DeviceConfigs(rev)
	if derr != nil {
		return nil, derr
	}
	out := []render.DeviceFiles{}
	for _, df := range deviceFiles(cfgs) {
		if device == "" || df.Device == device {
			out = append(out, df)
		}
	}
	if device != "" && len(out) == 0 {
		return nil, notFoundf("device", device)
	}
	return out, nil
}

func (s *Server) fabricDiff(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	to, err := uintQuery(r, "to")
	if err != nil {
		return nil, err
	}
	from, err := uintQuery(r, "from")
	if err != nil {
		return nil, err
	}
	newCfg, to, derr := s.fsm.DeviceConfigs(to)
	if derr != nil {
		return nil, derr
	}
	if r.URL.Query().Get("from") == "" && to > 0 {
		from = to - 1
	}
	oldCfg := map[string]state.DeviceConfig{}
	if from > 0 {
		if oldCfg, from, derr = s.fsm.DeviceConfigs(from); derr != nil {
			return nil, derr
		}
	}
	if from > to {
		return nil, domain.Invalid("from", "from %d is after to %d", from, to)
	}
	device := r.URL.Query().Get("device")
	keep := func(m map[string]state.DeviceConfig) map[string]state.DeviceConfig {
		if device == "" {
			return m
		}
		out := map[string]state.DeviceConfig{}
		if dc, ok := m[device]; ok {
			out[device] = dc
		}
		return out
	}
	out := api.FabricDiff{From: from, To: to, Devices: []api.DeviceDiff{}}
	for _, d := range render.Diff(deviceFiles(keep(oldCfg)), deviceFiles(keep(newCfg))) {
		out.Devices = append(out.Devices, api.DeviceDiff{Device: d.Device, Text: d.String()})
	}
	return out, nil
}

func (s *Server) fabricDeploy(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	if s.driver == nil {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "fabric-driver", Message: "this server runs without a fabric driver (--fabric-driver none)"}
	}
	if reason, ok := r.URL.Query()["override"]; ok {
		// An admin's decision over the verifier's, in the events: the
		// latest revision, the one `fabric status` says is blocked.
		rev := s.fsm.FabricStatus().Revision
		if _, err := s.propose(r.Context(), state.CmdFabricOverride, p.actor(), state.FabricOverrideCmd{Rev: rev, Reason: strings.Join(reason, " ")}); err != nil {
			return nil, err
		}
		// Deploy what was overridden, not a compile of the state since.
		if err := s.deployWait(r.Context(), false, true); err != nil {
			return nil, err
		}
		return s.fabricStatusNow(), nil
	}
	if err := s.deployWait(r.Context(), true, true); err != nil && !errors.Is(err, errStale) {
		return nil, err
	}
	return s.fabricStatusNow(), nil
}

func (s *Server) fabricVerify(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	c, err := s.compileNow(s.clock.Now(), nil)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "topology", Message: "no topology applied yet: nothing to verify"}
	}
	c.verified()
	out := api.FabricVerify{OK: c.report.OK(), Report: c.report, Text: c.report.Text(50)}
	if r.URL.Query().Get("matrix") == "true" {
		out.Reachability = map[string][]string{}
		for from, tos := range verify.Reachability(c.intent, verify.EnforceByNOS) {
			var ts []string
			for _, to := range tos {
				ts = append(ts, to.String())
			}
			out.Reachability[from.String()] = ts
		}
	}
	return out, nil
}

// apiFabricStatus converts the state's record into the API's answer (the
// fields are the same; the types differ so the CLI need not link state).
func apiFabricStatus(st *state.FabricStatus) *api.FabricStatus {
	out := &api.FabricStatus{Revision: st.Revision, Deployable: st.Deployable, Blocked: st.Blocked, Devices: make([]api.DeviceState, 0, len(st.Devices))}
	for _, d := range st.Devices {
		out.Devices = append(out.Devices, api.DeviceState(d))
	}
	return out
}

func apiRevisions(rs []state.RevisionInfo) []api.RevisionInfo {
	out := make([]api.RevisionInfo, 0, len(rs))
	for _, r := range rs {
		out = append(out, api.RevisionInfo(r))
	}
	return out
}
