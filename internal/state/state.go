package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// data is everything that is persisted: the snapshot is its JSON encoding.
type data struct {
	Topology    *domain.Topology             `json:"topology,omitempty"`
	Fingerprint string                       `json:"fingerprint,omitempty"`
	TopologyRev uint64                       `json:"topologyRevision"`
	Tenants     map[string]*domain.Tenant    `json:"tenants"`
	Workspaces  map[string]*domain.Workspace `json:"workspaces"`
	Jobs        map[uint64]*domain.Job       `json:"jobs"`
	Tokens      map[string]*storedToken      `json:"tokens"`
	Members     map[string]Member            `json:"members"`
	// Nodes holds the conditions of servers that are not plainly schedulable.
	Nodes     map[string]*domain.NodeCondition `json:"nodes"`
	Events    []domain.Event                   `json:"events"`
	NextJobID uint64                           `json:"nextJobID"`
	// SubmitKeys maps recent idempotency keys to the job they created;
	// SubmitKeyOrder evicts the oldest beyond maxSubmitKeys (in log order,
	// so every replica evicts the same ones). From apply rules 7 a key is
	// in the order once; states of earlier rules may hold one twice
	// (jobs.go, keyOnce).
	SubmitKeys     map[string]uint64 `json:"submitKeys"`
	SubmitKeyOrder []string          `json:"submitKeyOrder"`
	NextEvent      uint64            `json:"nextEvent"`
	// Fabric is the network side: id pools, revisions, devices (fabric.go).
	Fabric fabricData `json:"fabric"`
	// Hosts holds node agents' facts, conditions and the host policy (hosts.go).
	Hosts hostsData `json:"hosts"`
	// Usage is the usage archive: the runs of ended jobs retention removed,
	// by end time (retain.go). Snapshots from before it load with none.
	Usage []domain.UsageRecord `json:"usageArchive,omitempty"`
	// Pools are the server pools by name (pools.go); none before rules 5,
	// and then no key: the digest of a state without pools is unchanged.
	Pools map[string]*domain.ServerPool `json:"pools,omitempty"`
	// Rules is the highest apply-rules version of an entry applied to
	// this state (rules.go): what a binary must apply to read it. A
	// snapshot carries it, so a binary older than the state it is given
	// stops at Restore as it stops at an entry. 0 before it was kept.
	Rules int `json:"rules,omitempty"`
}

// capacity is derived from the topology (never persisted).
type capacity struct {
	servers      map[string]*domain.Server
	total        int
	byModel      map[string]int
	maxPerServer map[string]int // GPU model -> most GPUs on one server
	// serverLeaves are the leaves each server is cabled to, sorted: a
	// server held whole has a link (and its tenant's VRF) on each.
	serverLeaves map[string][]string
	// static is the scheduler's index of the topology, built once per apply.
	static *sched.Static
}

// FSM is the state machine. It implements raft.FSM.
type FSM struct {
	mu  sync.RWMutex
	d   data
	cap capacity
	// jobs orders data.Jobs for the reads (jobindex.go): derived, rebuilt
	// by reset, maintained by apply.
	jobs jobIndex
	// reads keeps the lists and tallies the API's reads need
	// (readindex.go): derived, filed after every apply, rebuilt by reset.
	reads readIndex
	// snapJobs keeps the jobs' copies and JSON between raft snapshots
	// (snapshot.go), so a snapshot costs the apply loop the jobs changed
	// since the last one, not the whole state.
	snapJobs snapshotJobs
	// fingerprintJobs keeps the jobs' part of FabricFingerprint (fabric.go).
	fingerprintJobs    jobsFingerprint
	fingerprintTenants tenantsFingerprint
	// applied is the raft index of the last applied entry.
	applied uint64
	// changed wakes readers waiting for the next change (watch.go).
	changed broadcaster
	// refused counts log entries applied since start whose command was
	// refused: each is a command the leader's Check let through (the state
	// changed between the check and the apply) or an entry written before
	// Check existed.
	refused map[CommandType]uint64
	// maxRules is the highest apply-rules version this binary applies
	// (rules.go); halt is called once when an entry needs more, or names
	// a command type this binary does not know. halted is that entry:
	// once set, nothing more is applied, snapshotted or restored.
	maxRules int
	halt     func(error)
	halted   *UnappliableError
	// keyWindow is how many idempotency keys are remembered:
	// maxSubmitKeys. Not an Option: every member must evict the same
	// keys; tests of the window set a smaller one.
	keyWindow int
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty state.
func New(opts ...Option) *FSM {
	f := &FSM{maxRules: RulesLatest, keyWindow: maxSubmitKeys}
	for _, o := range opts {
		o(f)
	}
	f.reset(newData())
	return f
}
func newData() data {
	return data{
		Tenants:    map[string]*domain.Tenant{},
		Workspaces: map[string]*domain.Workspace{},
		Jobs:       map[uint64]*domain.Job{},
		Tokens:     map[string]*storedToken{},
		Members:    map[string]Member{},
		Nodes:      map[string]*domain.NodeCondition{},
		SubmitKeys: map[string]uint64{},
		NextJobID:  1,
		NextEvent:  1,
	}
}
func (f *FSM) reset(d data) {
	f.d = d
	f.cap = deriveCapacity(d.Topology)
	vers := f.jobs.vers.restart()
	f.jobs = newJobIndex(d.Jobs)
	f.jobs.vers = vers
	f.reads = newReadIndex(d.Jobs, vers.gen)
	f.reads.events.sync(d.Events)
	f.snapJobs.restart(&f.d)
	f.snapJobs.follow(f) // a restore's jobs copied now, not at the next apply
}
func deriveCapacity(t *domain.Topology) capacity {
	c := capacityOf(t)
	c.static = sched.NewStatic(t)
	return c
}

// capacityOf is deriveCapacity without the scheduler's index, which the
// checks do not need.
func capacityOf(t *domain.Topology) capacity {
	c := capacity{servers: map[string]*domain.Server{}, byModel: map[string]int{}, maxPerServer: map[string]int{}, serverLeaves: map[string][]string{}}
	if t == nil {
		return c
	}
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			for _, cb := range f.Cables {
				if !slices.Contains(c.serverLeaves[cb.Server], cb.Leaf) {
					c.serverLeaves[cb.Server] = append(c.serverLeaves[cb.Server], cb.Leaf)
				}
			}
		}
	}
	for _, ls := range c.serverLeaves {
		slices.Sort(ls)
	}
	for _, s := range t.Servers() {
		c.servers[s.Name] = s
		c.total += s.GPUs
		c.byModel[s.GPUModel] += s.GPUs
		if s.GPUs > c.maxPerServer[s.GPUModel] {
			c.maxPerServer[s.GPUModel] = s.GPUs
		}
	}
	return c
}

// Apply implements raft.FSM. It returns a *Result for every entry.
//
// An entry this binary cannot apply (rules.go: a version above MaxRules, a
// command type it does not know) stops the FSM instead of being refused:
// the leader applied it, so refusing it here and going on would leave this
// member's state silently different from the others' (and this member may
// lead later). Raft's FSM cannot fail an entry, so the FSM calls its halt
// hook (a server exits non-zero) and, should that return, applies nothing
// more.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	defer f.changed.broadcast() // runs after the unlock: woken readers find the new state
	f.mu.Lock()
	if f.halted != nil {
		f.mu.Unlock()
		return &Result{Err: domain.Errorf(domain.CodeUnavailable, "this member stopped at an entry it cannot apply: %v", f.halted)}
	}
	c, derr := decodeCommand(l.Data)
	if derr == nil {
		if u := f.appliable(l.Index, &c); u != nil {
			f.halted = u
			f.mu.Unlock()
			f.stop(u)
			return &Result{Err: domain.Errorf(domain.CodeInternal, "%v", u), cmd: c.Type}
		}
	}
	defer f.mu.Unlock()
	f.applied = l.Index
	if derr == nil && c.rules() > f.d.Rules {
		f.d.Rules = c.rules()
	}
	r := f.applyDecoded(c, derr)
	if r.Err != nil {
		if f.refused == nil {
			f.refused = map[CommandType]uint64{}
		}
		f.refused[r.cmd]++
	}
	return r
}

// stop calls the halt hook outside the lock (a hook that reads the state,
// as a test's does, would otherwise deadlock). Without one it panics:
// going on is never an option.
func (f *FSM) stop(u *UnappliableError) {
	if f.halt == nil {
		panic(u)
	}
	f.halt(u)
}

// Check runs a command's checks against the current state without
// applying it. The leader calls it before proposing, so a command the
// state machine would refuse never enters the log. The rules are not
// copied: Check runs the command's own handler, which stops where its
// checks end and its changes begin (Command.check), under the apply rules
// the command carries (the version the leader proposes it at). Apply
// checks again, against the state the entry meets.
func (f *FSM) Check(b []byte) *domain.Error {
	c, derr := decodeCommand(b)
	if derr != nil {
		return derr
	}
	return f.CheckCommand(c)
}

// CheckCommand is Check of the command EncodeCommand returned with the
// entry, which it would decode to: the leader checks what it proposes
// without decoding it again.
func (f *FSM) CheckCommand(c Command) *domain.Error {
	if u := f.appliable(0, &c); u != nil {
		return domain.Errorf(domain.CodeInternal, "%s under apply rules %d: this binary applies command types it knows under rules 1 to %d", c.Type, c.rules(), f.maxRules)
	}
	h := handlers[c.Type]
	c.check = true
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, err := h(f, &c)
	return err
}

// Refused is the number of log entries applied since start that the state
// machine refused (see FSM.refused): of the given command types, or of all
// when none is given. The leader's own loops may see a refusal now and then
// (a fabric revision the state moved past between check and apply); a
// caller's command should never be.
func (f *FSM) Refused(types ...CommandType) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var n uint64
	for t, k := range f.refused {
		if len(types) == 0 || slices.Contains(types, t) {
			n += k
		}
	}
	return n
}

// ApplyCommand applies an encoded command outside Raft (tests, simulator).
func (f *FSM) ApplyCommand(b []byte) *Result {
	defer f.changed.broadcast()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(b)
}
func (f *FSM) apply(b []byte) *Result {
	c, derr := decodeCommand(b)
	if derr == nil {
		if u := f.appliable(f.applied+1, &c); u != nil {
			// Outside raft (the simulator, tests) there is no log to
			// stop: refuse, as an error the caller sees.
			return &Result{Err: domain.Errorf(domain.CodeInternal, "%v", u), cmd: c.Type}
		}
	}
	return f.applyDecoded(c, derr)
}

// applyDecoded applies a decoded command this binary can apply.
func (f *FSM) applyDecoded(c Command, derr *domain.Error) *Result {
	defer f.refile()
	if derr != nil {
		return &Result{Err: derr}
	}
	v, err := handlers[c.Type](f, &c)
	if err != nil {
		return &Result{Err: err, cmd: c.Type}
	}
	return &Result{Value: v, cmd: c.Type}
}

// event appends an audit event; called by handlers after they changed state.
func (f *FSM) event(c *Command, action, object, tenant, workspace, msg string) {
	f.d.Events = append(f.d.Events, domain.Event{
		Seq: f.d.NextEvent, At: c.At, Actor: c.Actor, Action: action, Object: object,
		Tenant: tenant, Workspace: workspace, Message: msg,
	})
	f.d.NextEvent++
}

// Snapshot implements raft.FSM: a deep copy taken under the read lock, encoded
// outside it so that writes continue while the snapshot is persisted.
//
// A halted FSM takes none. Raft counts the entry the FSM stopped at as
// applied (Apply returned), so a snapshot taken now would be labelled with
// an index at or past it: a restart, even with an upgraded binary, would
// restore it and never apply the entry, which is the divergence the stop
// is there to prevent. Without the snapshot the entry stays in the log
// and the upgraded binary replays it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Halted(); err != nil {
		return nil, fmt.Errorf("no snapshot: %w", err)
	}
	return f.snapJobs.snapshot(f)
}

// Restore implements raft.FSM. A halted FSM restores nothing: it stays
// stopped until the binary is replaced.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.Halted(); err != nil {
		return fmt.Errorf("no restore: %w", err)
	}
	d := newData()
	if err := json.NewDecoder(rc).Decode(&d); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	f.mu.Lock()
	if d.Rules > f.maxRules {
		// A state built under rules this binary does not apply: read
		// by it, fields it does not know would be dropped and rules it
		// does not have would act on the rest. Stop as at an entry.
		u := &UnappliableError{Snapshot: true, Rules: d.Rules, MaxRules: f.maxRules}
		f.halted = u
		f.mu.Unlock()
		f.stop(u)
		return fmt.Errorf("no restore: %w", u)
	}
	f.reset(d)
	f.mu.Unlock()
	f.changed.broadcast()
	return nil
}

// handler applies one command type. It must validate everything before it
// changes anything: a refused command leaves the state untouched. Where
// the checks end it returns nil, nil if c.check is set: FSM.Check runs it
// so, under the read lock, so nothing before that line may change state.
type handler func(f *FSM, c *Command) (any, *domain.Error)

var handlers = map[CommandType]handler{
	CmdTopologyApply:   (*FSM).applyTopology,
	CmdTenantCreate:    (*FSM).applyTenantCreate,
	CmdTenantDelete:    (*FSM).applyTenantDelete,
	CmdWorkspaceCreate: (*FSM).applyWorkspaceCreate,
	CmdWorkspaceUpdate: (*FSM).applyWorkspaceUpdate,
	CmdWorkspaceDelete: (*FSM).applyWorkspaceDelete,
	CmdTokenCreate:     (*FSM).applyTokenCreate,
	CmdTokenDelete:     (*FSM).applyTokenDelete,
	CmdTokensUsed:      (*FSM).applyTokensUsed,
	CmdJobSubmit:       (*FSM).applyJobSubmit,
	CmdJobCancel:       (*FSM).applyJobCancel,
	CmdJobsPlace:       (*FSM).applyJobsPlace,
	CmdPlanApply:       (*FSM).applyPlan,
	CmdMemberSet:       (*FSM).applyMemberSet,
	CmdJobReport:       (*FSM).applyJobReport,
	CmdJobsPreempt:     (*FSM).applyJobsPreempt,
	CmdJobsRelease:     (*FSM).applyJobsRelease,
	CmdNodeSet:         (*FSM).applyNodeSet,
	CmdNodeRuntime:     (*FSM).applyNodeRuntime,
	CmdTenantUpdate:    (*FSM).applyTenantUpdate,
	CmdFabricRevision:  (*FSM).applyFabricRevision,
	CmdFabricDeployed:  (*FSM).applyFabricDeployed,
	CmdFabricOptions:   (*FSM).applyFabricOptions,
	CmdFabricOverride:  (*FSM).applyFabricOverride,
	CmdHostReport:      (*FSM).applyHostReport,
	CmdHostHeartbeat:   (*FSM).applyHostHeartbeat,
	CmdHostAccept:      (*FSM).applyHostAccept,
	CmdHostPolicy:      (*FSM).applyHostPolicy,
	CmdJobsPathHealth:  (*FSM).applyJobsPathHealth,
	CmdRetain:          (*FSM).applyRetain,
	CmdPoolSet:         (*FSM).applyPoolSet,
	CmdJobPool:         (*FSM).applyJobPool,
}

func decode[T any](c *Command) (*T, *domain.Error) {
	var p T
	if err := json.Unmarshal(c.Payload, &p); err != nil {
		return nil, domain.Errorf(domain.CodeInternal, "decode %s payload: %v", c.Type, err)
	}
	return &p, nil
}
func asDomainError(err error) *domain.Error {
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	return domain.Errorf(domain.CodeInvalidArgument, "%v", err)
}
