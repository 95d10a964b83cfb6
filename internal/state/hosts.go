package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// Hosts: node agents' facts, the conditions derived from them (drift,
// lost heartbeats) and the policy that turns conditions into cordons.
//
// Heartbeats themselves are not in the log: the leader keeps when it last
// heard each agent and proposes host.heartbeat only when a node goes
// silent or comes back. Facts are in the log, but an agent sends them only
// when they change (its heartbeat carries their fingerprint).

// hostsData is the persisted part (data.Hosts).
type hostsData struct {
	Records map[string]*domain.HostStatus `json:"records,omitempty"`
	// Policy nil means domain.DefaultHostPolicy().
	Policy *domain.HostPolicy `json:"policy,omitempty"`
}

func (f *FSM) hostPolicy() domain.HostPolicy {
	if p := f.d.Hosts.Policy; p != nil {
		return *p
	}
	return domain.DefaultHostPolicy()
}

func (f *FSM) applyHostPolicy(c *Command) (any, *domain.Error) {
	p, derr := decode[HostPolicySet](c)
	if derr != nil {
		return nil, derr
	}
	pol := p.Policy
	if err := domain.ValidateHostPolicy(&pol); err != nil {
		return nil, err
	}
	for t := range pol.TenantMinDriver {
		if _, ok := f.d.Tenants[t]; !ok {
			return nil, &domain.Error{Code: domain.CodeNotFound, Field: "tenantMinDriver." + t, Message: fmt.Sprintf("tenant %q not found", t)}
		}
	}
	if c.check {
		return nil, nil
	}
	pol.CordonOn = slices.Clone(pol.CordonOn)
	pol.TenantMinDriver = maps.Clone(pol.TenantMinDriver)
	f.d.Hosts.Policy = &pol
	f.event(c, "host.policy", "hosts", "", "", fmt.Sprintf("heartbeatTimeout=%ds cordonOn=%s tenantMinDriver=%v", pol.HeartbeatTimeoutSeconds, strings.Join(pol.CordonOn, ","), pol.TenantMinDriver))
	return &pol, nil
}

func (f *FSM) applyHostReport(c *Command) (any, *domain.Error) {
	p, derr := decode[HostReport](c)
	if derr != nil {
		return nil, derr
	}
	srv, ok := f.cap.servers[p.Node]
	if !ok {
		return nil, domain.NotFound("server", p.Node)
	}
	facts := p.Facts
	if err := domain.ValidateHostFacts(&facts); err != nil {
		return nil, err
	}
	if len(p.Hash) > 64 || len(p.Agent) > 256 {
		return nil, domain.Invalid("hash", "hash or agent too long")
	}
	if c.check {
		return nil, nil
	}
	if f.d.Hosts.Records == nil {
		f.d.Hosts.Records = map[string]*domain.HostStatus{}
	}
	rec := f.d.Hosts.Records[p.Node]
	first := rec == nil
	if first {
		rec = &domain.HostStatus{Node: p.Node, FirstSeen: c.At}
		f.d.Hosts.Records[p.Node] = rec
	}
	var prev *domain.HostFacts
	if !first {
		prev = rec.Facts
	}
	if len(rec.Baseline) == 0 {
		rec.Baseline = hostfacts.NewBaseline(&facts)
	}
	f.gpusVanished(c, rec, prev, &facts)
	rec.Facts, rec.FactsHash, rec.ReportedAt, rec.Agent = &facts, p.Hash, c.At, p.Agent
	if first {
		f.event(c, "host.report", "server/"+p.Node, "", "", fmt.Sprintf("first report from %s: %d GPUs, %d NICs, driver %s", orDashS(p.Agent), len(facts.GPUs), len(facts.NICs), orDashS(facts.Driver)))
	} else if prev != nil && prev.Driver != facts.Driver {
		f.event(c, "host.driver", "server/"+p.Node, "", "", fmt.Sprintf("driver %s -> %s", orDashS(prev.Driver), orDashS(facts.Driver)))
	}
	// A report is proof of life.
	f.heartbeatRestored(c, rec)
	f.updateDrift(c, srv, rec)
	return CopyHost(rec), nil
}

// gpusVanished warns the jobs holding a GPU that was reported before and
// is not now (by UUID: indices shift when a GPU falls off the bus).
func (f *FSM) gpusVanished(c *Command, rec *domain.HostStatus, prev, now *domain.HostFacts) {
	has := func(fs *domain.HostFacts, uuid string) bool {
		if fs == nil {
			return true // no earlier report: what the baseline pins was there
		}
		return slices.ContainsFunc(fs.GPUs, func(g domain.HostGPU) bool { return g.UUID == uuid })
	}
	for _, b := range rec.Baseline {
		if !has(prev, b.UUID) || has(now, b.UUID) {
			continue
		}
		f.event(c, "host.gpu-vanished", "server/"+rec.Node, "", "", fmt.Sprintf("GPU %d (%s, bus %s) is no longer reported", b.Index, b.UUID, b.PCIBusID))
		for _, j := range f.jobsOnGPU(rec.Node, b.Index) {
			f.warnJob(c, j, domain.WarningGPUVanished, fmt.Sprintf("GPU %d (%s) of node %s vanished at %s while the job held it", b.Index, b.UUID, rec.Node, c.At.UTC().Format(time.RFC3339)))
		}
	}
}

// jobsOnGPU lists the jobs holding any part of a GPU of a node, by ID.
func (f *FSM) jobsOnGPU(node string, gpu int) []*domain.Job {
	var out []*domain.Job
	for j := range f.jobs.liveJobs() {
		if !holdsGPUs(j) {
			continue
		}
		for _, p := range j.Placement {
			if p.Server == node && (gpu < 0 || slices.Contains(p.GPUs, gpu)) {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// warnJob adds a warning to a job (copy on write: copies handed to readers
// never see it change) and to the audit trail.
func (f *FSM) warnJob(c *Command, j *domain.Job, code, msg string) {
	w := append(slices.Clip(j.Warnings), domain.Reason{Code: code, Message: msg})
	if len(w) > domain.MaxJobWarnings {
		w = slices.Clone(w[len(w)-domain.MaxJobWarnings:])
	}
	j.Warnings, j.UpdatedAt = w, c.At
	f.jobs.touch(j)
	f.event(c, "job.warning", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, msg)
}

// updateDrift compares the record's facts with the inventory, keeps the
// time each condition first appeared, records appearances and
// disappearances as events, and applies the cordon policy.
func (f *FSM) updateDrift(c *Command, srv *domain.Server, rec *domain.HostStatus) {
	pol := f.hostPolicy()
	fab := f.fabricOf(srv.Name)
	in := hostfacts.DriftInput{Server: srv, RailOptimized: fab != nil && fab.RailOptimized, Facts: rec.Facts, Baseline: rec.Baseline, Peers: f.nvlinkPeers(srv)}
	found := hostfacts.Compare(in)
	old := map[string]domain.HostCondition{}
	var keep []domain.HostCondition
	for _, cond := range rec.Conditions {
		old[cond.Type] = cond
		if cond.Type == domain.CondHeartbeat {
			keep = append(keep, cond)
		}
	}
	newCordon := []string{}
	for i := range found {
		cond := &found[i]
		cond.Cordons = pol.Cordons(cond.Type)
		if o, ok := old[cond.Type]; ok {
			cond.Since = o.Since
			if o.Message != cond.Message {
				f.event(c, "host.drift", "server/"+rec.Node, "", "", cond.Type+": "+cond.Message)
			}
			continue
		}
		cond.Since = c.At
		f.event(c, "host.drift", "server/"+rec.Node, "", "", cond.Type+": "+cond.Message)
		if cond.Cordons {
			newCordon = append(newCordon, cond.Type)
		}
	}
	for _, o := range rec.Conditions {
		if o.Type != domain.CondHeartbeat && !slices.ContainsFunc(found, func(n domain.HostCondition) bool { return n.Type == o.Type }) {
			f.event(c, "host.drift-cleared", "server/"+rec.Node, "", "", o.Type+" no longer differs from the inventory")
		}
	}
	rec.Conditions = append(keep, found...)

	node := f.node(rec.Node)
	if rec.CordonedForDrift && !node.Cordoned {
		rec.CordonedForDrift = false // an operator uncordoned it: that stands until new drift appears
	}
	cordoning := slices.ContainsFunc(found, func(n domain.HostCondition) bool { return n.Cordons })
	switch {
	case len(newCordon) > 0 && !node.Cordoned:
		node.Cordoned = true
		node.Reason = "drift: " + driftReason(found)
		node.UpdatedAt, node.UpdatedBy = c.At, c.Actor
		rec.CordonedForDrift = true
		f.setNode(&node)
		f.event(c, "node.cordon", "server/"+rec.Node, "", "", "cordoned by the host policy: "+node.Reason)
	case !cordoning && rec.CordonedForDrift:
		node.Cordoned = false
		node.Reason = ""
		node.UpdatedAt, node.UpdatedBy = c.At, c.Actor
		rec.CordonedForDrift = false
		f.setNode(&node)
		f.event(c, "node.uncordon", "server/"+rec.Node, "", "", "uncordoned by the host policy: the drift that cordoned it is gone")
	case cordoning && rec.CordonedForDrift:
		if r := "drift: " + driftReason(found); node.Reason != r {
			node.Reason = r
			f.setNode(&node)
		}
	}
}

func driftReason(conds []domain.HostCondition) string {
	var parts []string
	for _, c := range conds {
		if c.Cordons {
			parts = append(parts, c.Type+": "+c.Message)
		}
	}
	s := strings.Join(parts, "; ")
	if len(s) > 256 {
		s = s[:253] + "..."
	}
	return s
}

// setNode stores a condition (or drops it when it is plain again), as
// node.set does.
func (f *FSM) setNode(n *domain.NodeCondition) {
	if n.Schedulable() && n.Reason == "" {
		delete(f.d.Nodes, n.Server)
		return
	}
	cp := *n
	f.d.Nodes[n.Server] = &cp
}

// nvlinkPeers returns the other servers of a server's declared NVLink
// domain with the NVLink cluster each reported ("" when none).
func (f *FSM) nvlinkPeers(srv *domain.Server) map[string]string {
	if srv.NVLinkDomain == "" || srv.NVLinkDomain == srv.Name {
		return nil
	}
	out := map[string]string{}
	for name, s := range f.cap.servers {
		if name == srv.Name || s.NVLinkDomain != srv.NVLinkDomain {
			continue
		}
		out[name] = ""
		if r := f.d.Hosts.Records[name]; r != nil && r.Facts != nil {
			out[name] = r.Facts.NVLinkCluster
		}
	}
	return out
}

func (f *FSM) fabricOf(server string) *domain.Fabric {
	if f.d.Topology == nil {
		return nil
	}
	for si := range f.d.Topology.Sites {
		for fi := range f.d.Topology.Sites[si].Fabrics {
			fab := &f.d.Topology.Sites[si].Fabrics[fi]
			for _, s := range fab.Servers {
				if s.Name == server {
					return fab
				}
			}
		}
	}
	return nil
}

func (f *FSM) applyHostHeartbeat(c *Command) (any, *domain.Error) {
	p, derr := decode[HostHeartbeat](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	changed := []string{}
	for _, n := range slices.Sorted(slices.Values(p.Nodes)) {
		rec := f.d.Hosts.Records[n]
		if _, inInventory := f.cap.servers[n]; rec == nil || !inInventory {
			continue // never reported, or no longer in the inventory: nothing to mark
		}
		if !p.Lost {
			if f.heartbeatRestored(c, rec) {
				changed = append(changed, n)
			}
			continue
		}
		if _, lost := rec.Condition(domain.CondHeartbeat); lost {
			continue
		}
		msg := fmt.Sprintf("no heartbeat for %ds", p.TimeoutSeconds)
		if t, ok := p.LastSeen[n]; ok && !t.IsZero() {
			msg = fmt.Sprintf("no heartbeat since %s (timeout %ds)", t.UTC().Format(time.RFC3339), p.TimeoutSeconds)
		}
		rec.Conditions = append([]domain.HostCondition{{Type: domain.CondHeartbeat, Message: msg, Since: c.At}}, rec.Conditions...)
		node := f.node(n)
		if !node.Unhealthy {
			node.Unhealthy, node.UpdatedAt, node.UpdatedBy = true, c.At, c.Actor
			if node.Reason == "" {
				node.Reason = "heartbeat: " + msg
			}
			rec.UnhealthyForHeartbeat = true
			f.setNode(&node)
		}
		f.event(c, "host.heartbeat-lost", "server/"+n, "", "", msg+": marked unhealthy, nothing new is placed there")
		for _, j := range f.jobsOnGPU(n, -1) {
			f.warnJob(c, j, domain.WarningHeartbeatLost, fmt.Sprintf("node %s stopped sending heartbeats (%s); the job may have lost it", n, msg))
		}
		changed = append(changed, n)
	}
	return changed, nil
}

// heartbeatRestored clears a lost-heartbeat condition and the unhealthy
// mark it set; true when something changed.
func (f *FSM) heartbeatRestored(c *Command, rec *domain.HostStatus) bool {
	cond, lost := rec.Condition(domain.CondHeartbeat)
	if !lost {
		return false
	}
	rec.Conditions = slices.DeleteFunc(slices.Clone(rec.Conditions), func(x domain.HostCondition) bool { return x.Type == domain.CondHeartbeat })
	if rec.UnhealthyForHeartbeat {
		node := f.node(rec.Node)
		node.Unhealthy, node.UpdatedAt, node.UpdatedBy = false, c.At, c.Actor
		if strings.HasPrefix(node.Reason, "heartbeat: ") {
			node.Reason = ""
		}
		rec.UnhealthyForHeartbeat = false
		f.setNode(&node)
	}
	f.event(c, "host.heartbeat-restored", "server/"+rec.Node, "", "", fmt.Sprintf("heard again (silent since %s)", cond.Since.UTC().Format(time.RFC3339)))
	return true
}

func (f *FSM) applyHostAccept(c *Command) (any, *domain.Error) {
	p, derr := decode[HostAccept](c)
	if derr != nil {
		return nil, derr
	}
	srv, ok := f.cap.servers[p.Node]
	if !ok {
		return nil, domain.NotFound("server", p.Node)
	}
	rec := f.d.Hosts.Records[p.Node]
	if rec == nil || rec.Facts == nil {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "node", Message: fmt.Sprintf("node %s has no agent report to accept", p.Node)}
	}
	if c.check {
		return nil, nil
	}
	old := rec.Baseline
	rec.Baseline = hostfacts.NewBaseline(rec.Facts)
	f.event(c, "host.accept", "server/"+p.Node, "", "", fmt.Sprintf("GPU baseline re-pinned: %d GPUs (was %d)", len(rec.Baseline), len(old)))
	f.updateDrift(c, srv, rec)
	return CopyHost(rec), nil
}

// CopyHost deep-copies an agent record (through JSON: facts are a tree of
// slices).
func CopyHost(h *domain.HostStatus) *domain.HostStatus {
	b, err := json.Marshal(h)
	if err != nil {
		panic("host record is not serialisable: " + err.Error())
	}
	var out domain.HostStatus
	if err := json.Unmarshal(b, &out); err != nil {
		panic("host record does not round-trip: " + err.Error())
	}
	return &out
}

func orDashS(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// --- reads ---------------------------------------------------------------

// Host returns a node's agent record.
func (f *FSM) Host(node string) (*domain.HostStatus, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.d.Hosts.Records[node]
	if !ok {
		return nil, false
	}
	return CopyHost(r), true
}

// Hosts lists the agent records by node name.
func (f *FSM) Hosts() []domain.HostStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []domain.HostStatus{}
	for _, n := range slices.Sorted(maps.Keys(f.d.Hosts.Records)) {
		out = append(out, *CopyHost(f.d.Hosts.Records[n]))
	}
	return out
}

// HostPolicy returns the host policy in force.
func (f *FSM) HostPolicy() domain.HostPolicy {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.hostPolicy()
	p.CordonOn = slices.Clone(p.CordonOn)
	p.TenantMinDriver = maps.Clone(p.TenantMinDriver)
	return p
}

// HeartbeatState lists the nodes with an agent record and whether each is
// marked as lost, for the leader's heartbeat watch.
func (f *FSM) HeartbeatState() map[string]bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]bool, len(f.d.Hosts.Records))
	for n, r := range f.d.Hosts.Records {
		if _, ok := f.cap.servers[n]; !ok {
			continue // the server left the inventory; its record stays for the record
		}
		_, lost := r.Condition(domain.CondHeartbeat)
		out[n] = lost
	}
	return out
}

// hostView is what `node list` shows of a node's agent.
func (f *FSM) hostView(node string) (conds []domain.HostCondition, driver string) {
	r := f.d.Hosts.Records[node]
	if r == nil {
		return nil, ""
	}
	if r.Facts != nil {
		driver = r.Facts.Driver
	}
	return slices.Clone(r.Conditions), driver
}

// JobByExternalID returns tenant's job that a runtime knows by ext
// ("slurm:4242"): the one holding GPUs if any, else the newest. Each tenant
// names its own jobs: an external id is unique among one tenant's live
// jobs, not across tenants, so a tenant cannot take (or learn of) the id a
// runtime will give another tenant's job.
func (f *FSM) JobByExternalID(ext, tenant string) (*domain.Job, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	best := PickExternal(f.jobs.withExt(ext), func(j *domain.Job) bool { return j.Tenant == tenant })
	if best == nil {
		return nil, false
	}
	return CopyJob(best), true
}

// JobsByExternalID returns copies of the jobs of every tenant, live and
// ended, that have external id ext, by ID: the API picks among those its
// caller may see.
func (f *FSM) JobsByExternalID(ext string) []*domain.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	js := f.jobs.withExt(ext)
	out := make([]*domain.Job, len(js))
	for i, j := range js {
		out[i] = CopyJob(j)
	}
	return out
}

// PickExternal is the job a runtime's id names among jobs (by ID) that
// keep accepts: the newest live one, else the newest ended one.
func PickExternal(jobs []*domain.Job, keep func(*domain.Job) bool) *domain.Job {
	var best *domain.Job
	for _, j := range jobs {
		if !keep(j) {
			continue
		}
		if !j.State.Terminal() || best == nil || best.State.Terminal() {
			best = j // by ID: a later one is newer
		}
	}
	return best
}

// checkExternalID refuses an external id another live job already has:
// the Slurm prolog must find exactly one job by it. Which jobs count
// depends on the apply rules the command was proposed under (rules.go):
// up to RulesGlobalExternalID every tenant's, from RulesTenantExternalID
// only the same tenant's (another tenant's job with the id is no
// conflict, and is not mentioned: a tenant that submitted first with the
// id a runtime will give another tenant's job must not block it). This is
// where those versions differ; a future change of this rule bumps
// RulesLatest and keeps both branches (externalIDConflict), or a log
// replayed by the new binary reaches a state the cluster never had.
func (f *FSM) checkExternalID(s *domain.JobSpec, rules int) *domain.Error {
	if s.ExternalID == "" {
		return nil
	}
	for _, j := range f.jobs.withExt(s.ExternalID) {
		if err := externalIDConflict(rules, s, j); err != nil {
			return err
		}
	}
	return nil
}

// operatorSetNode runs inside node.set: an operator's word on cordon or
// health replaces the host policy's (the policy will not lift it), and
// draining with a grace tells the node's running jobs to stop by then
// (the scheduler releases their GPUs at the deadline, as for any
// preemption).
func (f *FSM) operatorSetNode(c *Command, p *NodeSet) {
	if r := f.d.Hosts.Records[p.Server]; r != nil {
		if p.Cordoned != nil {
			r.CordonedForDrift = false
		}
		if p.Unhealthy != nil {
			r.UnhealthyForHeartbeat = false
		}
	}
	if p.Draining == nil || !*p.Draining || p.GraceSeconds <= 0 {
		return
	}
	deadline := c.At.Add(time.Duration(p.GraceSeconds) * time.Second)
	for _, j := range f.jobsOnGPU(p.Server, -1) {
		if j.State != domain.JobReady && j.State != domain.JobRunning {
			continue
		}
		d := deadline
		r := domain.Reason{Code: "drained", Message: fmt.Sprintf("server %s is draining; stop by %s", p.Server, deadline.UTC().Format(time.RFC3339))}
		j.State, j.StopDeadline, j.Reason, j.UpdatedAt = domain.JobPreempting, &d, &r, c.At
		f.jobs.touch(j)
		f.event(c, "job.preempt", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, r.Message)
	}
}

// HasServer reports whether the inventory has a server of that name.
func (f *FSM) HasServer(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.cap.servers[name]
	return ok
}

// NodeCondition returns a server's condition (the zero condition when
// plainly schedulable).
func (f *FSM) NodeCondition(name string) domain.NodeCondition {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.node(name)
}
