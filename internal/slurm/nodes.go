package slurm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// sinfoFormat is the sinfo -o format the bridge reads: partition, nodes
// (a hostlist), state with its flag suffix (down~, idle*...) and reason.
// The reason is free text and comes last, so a '|' in it does not shift
// the others. Without -N sinfo groups the nodes of one partition, state
// and reason: 18 ms for 2,048 nodes where -N (a line per node) took
// 143 ms. The partition (%R: its name without the default's '*') costs
// no second call: sinfo reports by partition either way.
const sinfoFormat = "%R|%N|%T|%E"

// sinfoArgs read every partition: -a includes hidden ones (Hidden=YES)
// and those the bridge's user may not use, which sinfo leaves out for
// any user but root and SlurmUser; their jobs would stay held ("has no
// node sinfo shows"). sinfoPerNodeArgs: a line per node (-N).
var (
	sinfoArgs        = []string{"-h", "-a", "-o", sinfoFormat}
	sinfoPerNodeArgs = []string{"-h", "-a", "-N", "-o", sinfoFormat}
)

// Node is one Slurm node as sinfo -N shows it.
type Node struct {
	Name string
	// State is sinfo's long state with its suffix: idle~ (powered down),
	// down*, drained, draining, mixed#...
	State  string
	Reason string // "" when none
	// Partitions are the partitions sinfo shows the node in, in its
	// order.
	Partitions []string
}

// ParseSinfo reads the output of sinfo -h -o sinfoFormat (or with -N, a
// line per node): each line's hostlist is expanded, and each node kept
// once with every partition it is in. A partition without nodes has no
// line the bridge keeps.
func ParseSinfo(out string) ([]Node, error) {
	var nodes []Node
	at := map[string]int{}
	for n, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", 4)
		if len(f) != 4 || f[0] == "" {
			return nil, fmt.Errorf("sinfo line %d %q: want partition|nodes|state|reason (%s)", n+1, line, sinfoFormat)
		}
		if f[1] == "" {
			continue // a partition without nodes
		}
		names, err := ExpandHostlist(f[1])
		if err != nil {
			return nil, fmt.Errorf("sinfo line %d: %w", n+1, err)
		}
		reason := f[3]
		if reason == "none" {
			reason = ""
		}
		for _, name := range names {
			i, seen := at[name]
			if !seen {
				i = len(nodes)
				at[name] = i
				nodes = append(nodes, Node{Name: name, State: f[2], Reason: reason})
			}
			if !slices.Contains(nodes[i].Partitions, f[0]) {
				nodes[i].Partitions = append(nodes[i].Partitions, f[0])
			}
		}
	}
	return nodes, nil
}

// Unusable says, in Slurm's words, why slurmctld will start no job on the
// node ("DOWN", "DRAINED", "IDLE+NOT_RESPONDING"...); "" when it may. A
// powered-down cloud node (idle~) is usable: slurmctld boots it for a
// job. FUTURE nodes are not shown by sinfo at all: they are missing.
func (n Node) Unusable() string {
	base := strings.TrimRight(n.State, "*~#!%$@^-")
	notResponding := strings.Contains(n.State[len(base):], "*")
	var bad bool
	switch base {
	case "down", "drained", "draining", "drain", "fail", "failing", "future", "inval":
		bad = true
	}
	if !bad && !notResponding {
		return ""
	}
	s := strings.ToUpper(base)
	if notResponding {
		s += "+NOT_RESPONDING"
	}
	return s
}

// nodeView is what one pass knows of Slurm's nodes; nil when sinfo could
// not be read (nothing is then decided from nodes).
type nodeView struct {
	known    map[string]bool
	unusable map[string]string // node: jobfabric's cordon reason
	// parts are the nodes of each partition, sorted (pools.go).
	parts map[string][]string
}

// readNodes reads Slurm's nodes. An empty list (no partition) is no
// view: every placement would be "missing".
func (b *Bridge) readNodes(ctx context.Context) *nodeView {
	out, err := b.cfg.Slurm.Command(ctx, "sinfo", sinfoArgs...)
	if err != nil {
		b.cfg.Logger.Warn("slurm bridge: read the nodes (sinfo); node states not checked this pass", "err", err)
		return nil
	}
	nodes, err := ParseSinfo(string(out))
	if err != nil {
		// A hostlist ExpandHostlist cannot read: a line per node.
		if out, err = b.cfg.Slurm.Command(ctx, "sinfo", sinfoPerNodeArgs...); err == nil {
			nodes, err = ParseSinfo(string(out))
		}
	}
	if err != nil || len(nodes) == 0 {
		b.cfg.Logger.Warn("slurm bridge: read the nodes (sinfo); node states not checked this pass", "err", err, "nodes", len(nodes))
		return nil
	}
	v := &nodeView{known: make(map[string]bool, len(nodes)), unusable: map[string]string{}, parts: map[string][]string{}}
	for _, n := range nodes {
		v.known[n.Name] = true
		for _, part := range n.Partitions {
			v.parts[part] = append(v.parts[part], n.Name)
		}
		if st := n.Unusable(); st != "" {
			why := fmt.Sprintf("slurm %s: node %s is %s", b.cfg.Cluster, n.Name, st)
			if n.Reason != "" {
				why += ": " + n.Reason
			}
			v.unusable[n.Name] = clip(why, 256)
		}
	}
	for _, ns := range v.parts {
		slices.Sort(ns)
	}
	return v
}

// blocked says why Slurm cannot start a job on nodes now: the first node
// it cannot use (or does not have), or one a job stayed pending for not
// long ago (a suspect: Slurm may show it usable); "" when it can use them
// all. The suspects count even when sinfo could not be read: a job handed
// back from one must not be released onto it again.
func (b *Bridge) blocked(v *nodeView, nodes []string) string {
	now := b.cfg.Clock.Now()
	for _, n := range nodes {
		if v != nil {
			if why := v.unusable[n]; why != "" {
				return why
			}
		}
		if s, ok := b.suspect[n]; ok && now.Before(s.until) {
			return s.why
		}
		if v != nil && !v.known[n] {
			b.missing[n] = true
			return b.missingReason(n)
		}
	}
	return ""
}

func (b *Bridge) missingReason(node string) string {
	return clip(fmt.Sprintf("slurm %s: node %s is missing (in no partition of slurmctld, or FUTURE)", b.cfg.Cluster, node), 256)
}

// reportNodes tells jobfabric which servers Slurm can and cannot use,
// when that changed since the last report that went through: a server
// Slurm cannot use is cordoned for this runtime, and uncordoned when it
// can again. A server jobfabric placed a job on that Slurm does not have
// is reported unusable from then on (until Slurm has it); servers Slurm
// never had are not mentioned, as they may be another runtime's.
//
// It says whether jobfabric has the cordons the bridge decided (reported
// now or before): only then may the jobs Slurm cannot start be handed
// back, or jobfabric could place them on the same nodes again.
func (b *Bridge) reportNodes(ctx context.Context, v *nodeView) bool {
	if v == nil {
		return false
	}
	req := api.RuntimeNodesRequest{Runtime: "slurm:" + b.cfg.Cluster}
	unusable := maps.Clone(v.unusable)
	now := b.cfg.Clock.Now()
	for n, sus := range b.suspect {
		switch {
		case !now.Before(sus.until):
			delete(b.suspect, n)
		case unusable[n] == "":
			unusable[n] = sus.why
		}
	}
	for n := range b.missing {
		if v.known[n] {
			delete(b.missing, n)
			continue
		}
		unusable[n] = b.missingReason(n)
	}
	for _, n := range slices.Sorted(maps.Keys(v.known)) {
		if unusable[n] == "" {
			req.Usable = append(req.Usable, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(unusable)) {
		req.Unusable = append(req.Unusable, api.RuntimeNode{Server: n, Reason: unusable[n]})
	}
	if b.lastNodes != nil && maps.Equal(b.lastNodes, unusable) && slices.Equal(b.lastUsable, req.Usable) {
		return true
	}
	changed, err := b.cfg.API.ReportRuntimeNodes(ctx, req)
	if err != nil {
		b.cfg.Logger.Warn("slurm bridge: report the nodes Slurm cannot use", "unusable", len(unusable), "err", err)
		return false
	}
	b.lastNodes, b.lastUsable = unusable, req.Usable
	for _, c := range changed {
		b.cfg.Logger.Info("slurm bridge: node condition", "server", c.Server, "cordoned", c.Cordoned, "reason", c.Reason)
	}
	return true
}

// nodeReason: a pending reason that says the job waits for its nodes,
// not for resources or priority ("ReqNodeNotAvail, UnavailableNodes:gpu1",
// "NodeDown", "Nodes required for job are DOWN, DRAINED or reserved...").
func nodeReason(r string) bool {
	return strings.HasPrefix(r, "ReqNodeNotAvail") || r == "NodeDown" || strings.HasPrefix(r, "Nodes required for job are DOWN")
}

// stuck is a released job pending for its nodes: since when, on which
// placement.
type stuck struct {
	run   int
	since time.Time
}

// suspect is a node a job stayed pending for, kept cordoned until until:
// the end of the reservations resv that hold it (reservations.go), or a
// fixed while when none does.
type suspect struct {
	why   string
	until time.Time
	resv  []string
}

// suspectFor is how many StuckAfter a node a job stayed pending for is
// cordoned (10 minutes by default): long enough for the job to start
// elsewhere, short enough that a node Slurm shows usable is not lost for
// long when the cause was passing.
const suspectFor = 10

// rejection is a Ready job Slurm cannot start on its placement, to hand
// back to jobfabric after the pass has reported the nodes (so the next
// placement avoids them).
type rejection struct {
	slurmID string
	job     uint64
	why     string
	// pool, when set, is the pool the job moves to once handed back (its
	// Slurm job moved to another partition).
	pool *string
}

// unstick handles a released Slurm job still PENDING on its placement:
// when Slurm's reason says it waits for its nodes, for StuckAfter, the
// job is held again and handed back to jobfabric (rejected), which
// requeues it and places it elsewhere; the bridge then releases it there.
func (b *Bridge) unstick(ctx context.Context, p *pass, j *Job, ext string, jf *domain.Job) error {
	if !nodeReason(j.Reason) || jf.State != domain.JobReady || releasedRun(j) != jf.Requeues {
		return nil
	}
	now := b.cfg.Clock.Now()
	s, ok := b.stuck[ext]
	if !ok || s.run != jf.Requeues {
		s = stuck{run: jf.Requeues, since: now}
	}
	p.stuck[ext] = s
	waited := now.Sub(s.since)
	if waited < b.cfg.StuckAfter {
		return nil
	}
	if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "hold", j.ID); err != nil {
		return fmt.Errorf("hold slurm job %s stuck on its nodes: %w", j.ID, err)
	}
	delete(p.stuck, ext)
	nodes := PlacedNodes(jf)
	why := fmt.Sprintf("slurm job %s stayed pending %s on %s: %s", j.ID, waited.Round(time.Second), strings.Join(nodes, ","), j.Reason)
	if v := b.blocked(p.nodes, nodes); v != "" {
		why += " (" + v + ")"
	}
	// Slurm may show the nodes usable (a maintenance reservation, for
	// one): those its reason names, else all of the placement, are
	// cordoned a while so that the next placement is elsewhere.
	suspects := nodes
	if _, list, ok := strings.Cut(j.Reason, "UnavailableNodes:"); ok {
		if named, err := ExpandHostlist(strings.TrimSpace(list)); err == nil && len(named) > 0 {
			suspects = named
		}
	}
	// A reservation holding a node keeps it cordoned until it ends.
	rs, read := b.reservations(ctx, p)
	for _, n := range suspects {
		why := fmt.Sprintf("slurm %s: slurm job %s stayed pending %s for its nodes: %s", b.cfg.Cluster, j.ID, waited.Round(time.Second), j.Reason)
		s := suspect{until: now.Add(suspectFor * b.cfg.StuckAfter)}
		if read {
			if names, end := holding(rs, n, now, j.TimeLimit); len(names) > 0 {
				s.resv, s.until = names, end
				why = fmt.Sprintf("slurm %s: node %s is reserved (%s) until %s: slurm job %s stayed pending %s for it: %s",
					b.cfg.Cluster, n, strings.Join(names, ","), end.Format(time.RFC3339), j.ID, waited.Round(time.Second), j.Reason)
			}
		}
		s.why = clip(why, 256)
		b.suspect[n] = s
	}
	p.reject = append(p.reject, rejection{slurmID: j.ID, job: jf.ID, why: clip(why, 1024)})
	return nil
}

// rejectAll hands the rejected jobs of the pass so far back to jobfabric,
// if it has the bridge's cordons (cordoned: reportNodes went through).
// Otherwise they stay held in Slurm, Ready in jobfabric, and the next
// pass finds them again: blocked by the same nodes, or by the suspects.
func (b *Bridge) rejectAll(ctx context.Context, p *pass, cordoned bool) {
	rs := p.reject
	p.reject = nil
	if !cordoned && len(rs) > 0 {
		b.cfg.Logger.Warn("slurm bridge: jobs slurm cannot start on their placement stay held until jobfabric has the nodes' cordons", "jobs", len(rs))
		return
	}
	for _, r := range rs {
		_, err := b.cfg.API.Report(ctx, r.job, "rejected", r.why)
		switch {
		case domain.CodeOf(err) == domain.CodeFailedPrecondition:
			// No longer Ready (preempted, cancelled): the next pass acts
			// on its new state; the Slurm job stays held.
			continue
		case err != nil:
			b.cfg.Logger.Warn("slurm bridge: hand a job slurm cannot start back to jobfabric", "slurm_job", r.slurmID, "job", r.job, "err", err)
			continue
		}
		p.st.Rejected++
		b.cfg.Logger.Warn("slurm bridge: slurm cannot start the job on its placement; jobfabric places it again", "slurm_job", r.slurmID, "job", r.job, "why", r.why)
		if r.pool != nil {
			// Pending now: moved before the next cycle places it (or the
			// next pass moves it, finding it in the old pool).
			if _, err := b.cfg.API.SetJobPool(ctx, r.job, *r.pool); err != nil {
				b.cfg.Logger.Warn("slurm bridge: move a handed-back job to its new partition's pool", "slurm_job", r.slurmID, "job", r.job, "pool", *r.pool, "err", err)
				continue
			}
			p.st.Moved++
		}
	}
}

// clip bounds a message to n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
