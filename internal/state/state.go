package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
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
	// so every replica evicts the same ones).
	SubmitKeys     map[string]uint64 `json:"submitKeys"`
	SubmitKeyOrder []string          `json:"submitKeyOrder"`
	NextEvent      uint64            `json:"nextEvent"`
	// Fabric is the network side: id pools, revisions, devices (fabric.go).
	Fabric fabricData `json:"fabric"`
	// Hosts holds node agents' facts, conditions and the host policy (hosts.go).
	Hosts hostsData `json:"hosts"`
}

type storedToken struct {
	domain.Token
	Hash string `json:"hash"`
}

// capacity is derived from the topology (never persisted).
type capacity struct {
	servers      map[string]*domain.Server
	total        int
	byModel      map[string]int
	maxPerServer map[string]int // GPU model -> most GPUs on one server
	// static is the scheduler's index of the topology, built once per apply.
	static *sched.Static
}

// FSM is the state machine. It implements raft.FSM.
type FSM struct {
	mu  sync.RWMutex
	d   data
	cap capacity
	// applied is the raft index of the last applied entry.
	applied uint64
	// changed wakes readers waiting for the next change (watch.go).
	changed broadcaster
	// refused counts log entries applied since start whose command was
	// refused: each is a command the leader's Check let through (the state
	// changed between the check and the apply) or an entry written before
	// Check existed.
	refused map[CommandType]uint64
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty state.
func New() *FSM {
	f := &FSM{}
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
}

func deriveCapacity(t *domain.Topology) capacity {
	c := capacityOf(t)
	c.static = sched.NewStatic(t)
	return c
}

// capacityOf is deriveCapacity without the scheduler's index, which the
// checks do not need.
func capacityOf(t *domain.Topology) capacity {
	c := capacity{servers: map[string]*domain.Server{}, byModel: map[string]int{}, maxPerServer: map[string]int{}}
	if t == nil {
		return c
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
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	defer f.changed.broadcast() // runs after the unlock: woken readers find the new state
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = l.Index
	r := f.apply(l.Data)
	if r.Err != nil {
		if f.refused == nil {
			f.refused = map[CommandType]uint64{}
		}
		f.refused[r.cmd]++
	}
	return r
}

// Check runs a command's checks against the current state without
// applying it. The leader calls it before proposing, so a command the
// state machine would refuse never enters the log. The rules are not
// copied: Check runs the command's own handler, which stops where its
// checks end and its changes begin (Command.check). Apply checks again,
// against the state the entry meets.
func (f *FSM) Check(b []byte) *domain.Error {
	c, derr := decodeCommand(b)
	if derr != nil {
		return derr
	}
	h, ok := handlers[c.Type]
	if !ok {
		return domain.Errorf(domain.CodeInternal, "unknown command type %q", c.Type)
	}
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
	if derr != nil {
		return &Result{Err: derr}
	}
	h, ok := handlers[c.Type]
	if !ok {
		return &Result{Err: domain.Errorf(domain.CodeInternal, "unknown command type %q", c.Type), cmd: c.Type}
	}
	v, err := h(f, &c)
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
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	b, err := json.Marshal(&f.d)
	f.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return &snapshot{b: b}, nil
}

// Restore implements raft.FSM.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	d := newData()
	if err := json.NewDecoder(rc).Decode(&d); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	f.mu.Lock()
	f.reset(d)
	f.mu.Unlock()
	f.changed.broadcast()
	return nil
}

type snapshot struct{ b []byte }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.b); err != nil {
		return errors.Join(fmt.Errorf("write snapshot: %w", err), sink.Cancel())
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

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
	CmdTenantUpdate:    (*FSM).applyTenantUpdate,
	CmdFabricRevision:  (*FSM).applyFabricRevision,
	CmdFabricDeployed:  (*FSM).applyFabricDeployed,
	CmdHostReport:      (*FSM).applyHostReport,
	CmdHostHeartbeat:   (*FSM).applyHostHeartbeat,
	CmdHostAccept:      (*FSM).applyHostAccept,
	CmdHostPolicy:      (*FSM).applyHostPolicy,
}

func decode[T any](c *Command) (*T, *domain.Error) {
	var p T
	if err := json.Unmarshal(c.Payload, &p); err != nil {
		return nil, domain.Errorf(domain.CodeInternal, "decode %s payload: %v", c.Type, err)
	}
	return &p, nil
}

func (f *FSM) applyTopology(c *Command) (any, *domain.Error) {
	p, derr := decode[TopologyApply](c)
	if derr != nil {
		return nil, derr
	}
	t := &p.Topology
	if err := topology.Normalize(t, f.d.Topology); err != nil {
		return nil, asDomainError(err)
	}
	if err := topology.Validate(t); err != nil {
		return nil, err
	}
	fp := topology.Fingerprint(t)
	if fp == f.d.Fingerprint {
		return &domain.TopologyResult{Changed: false, Revision: f.d.TopologyRev, Fingerprint: fp, Summary: t.Summary()}, nil
	}
	next := capacityOf(t)
	// A server (or GPUs of it) holding an active job cannot disappear.
	for _, j := range f.sortedJobs() {
		for _, pl := range j.Placement {
			if j.State.Terminal() {
				continue
			}
			s, ok := next.servers[pl.Server]
			if !ok {
				return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
					Message: fmt.Sprintf("server %s holds %s job %d (%s/%s): it cannot be removed while the job runs", pl.Server, j.State, j.ID, j.Tenant, j.Workspace)}
			}
			for _, g := range pl.GPUs {
				if g >= s.GPUs {
					return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
						Message: fmt.Sprintf("GPU %d of server %s holds %s job %d: the server cannot shrink to %d GPUs while the job runs", g, pl.Server, j.State, j.ID, s.GPUs)}
				}
			}
		}
	}
	if g := f.totalGuaranteed(); g > next.total {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
			Message: fmt.Sprintf("workspaces guarantee %d GPUs but this topology has %d: lower guarantees first", g, next.total)}
	}
	for _, ref := range slices.Sorted(maps.Keys(f.d.Workspaces)) {
		if err := f.checkModelGuarantees(f.d.Workspaces[ref], next.byModel); err != nil {
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
				Message: fmt.Sprintf("workspace %s: %s: lower its model guarantees first", ref, err.Message)}
		}
	}
	if c.check {
		return nil, nil
	}
	next.static = sched.NewStatic(t)
	f.d.Topology, f.d.Fingerprint, f.cap = t, fp, next
	f.d.TopologyRev++
	sum := t.Summary()
	f.event(c, "topology.apply", "topology", "", "", fmt.Sprintf("revision %d: %d servers, %d GPUs, %d leaves, %d spines", f.d.TopologyRev, sum.Servers, sum.GPUs, sum.Leaves, sum.Spines))
	return &domain.TopologyResult{Changed: true, Revision: f.d.TopologyRev, Fingerprint: fp, Summary: sum}, nil
}

func asDomainError(err error) *domain.Error {
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	return domain.Errorf(domain.CodeInvalidArgument, "%v", err)
}

// totalGuaranteed is the GPUs reserved cluster-wide: per tenant its quota's
// guarantee when it has one, else the sum of its workspaces'.
func (f *FSM) totalGuaranteed() int {
	n := 0
	for _, t := range f.d.Tenants {
		n += f.tenantGuarantee(t.Name)
	}
	return n
}

func (f *FSM) tenantGuarantee(tenant string) int {
	if t, ok := f.d.Tenants[tenant]; ok && t.Quota != nil {
		return t.Quota.Guaranteed
	}
	return f.workspaceGuarantees(tenant)
}

func (f *FSM) workspaceGuarantees(tenant string) int {
	n := 0
	for _, w := range f.d.Workspaces {
		if w.Tenant == tenant {
			n += w.Guaranteed
		}
	}
	return n
}

func (f *FSM) applyTenantCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantCreate](c)
	if derr != nil {
		return nil, derr
	}
	t := p.Tenant
	if err := domain.ValidateTenant(&t); err != nil {
		return nil, err
	}
	if _, ok := f.d.Tenants[t.Name]; ok {
		return nil, &domain.Error{Code: domain.CodeAlreadyExists, Field: "name", Message: fmt.Sprintf("tenant %q already exists", t.Name)}
	}
	if t.Quota != nil {
		if err := f.checkCapacity("quota.guaranteed", t.Quota.Guaranteed); err != nil {
			return nil, err
		}
	}
	if c.check {
		return nil, nil
	}
	t.CreatedAt, t.CreatedBy = c.At, c.Actor
	f.d.Tenants[t.Name] = &t
	f.event(c, "tenant.create", "tenant/"+t.Name, t.Name, "", tenantString(&t))
	cp := t
	return &cp, nil
}

func tenantString(t *domain.Tenant) string {
	s := fmt.Sprintf("isolation=%s network=%s jobSegmentation=%t", t.Isolation, t.Network, t.JobSegmentation)
	if q := t.Quota; q != nil {
		s += fmt.Sprintf(" guaranteed=%d borrowLimit=%d lendLimit=%d", q.Guaranteed, q.BorrowLimit, q.LendLimit)
	}
	if len(t.Sites) > 0 {
		s += fmt.Sprintf(" sites=%v", t.Sites)
	}
	return s
}

// TenantUpdate replaces a tenant's quota and sites (isolation and network
// model cannot change under running jobs).
type TenantUpdate struct {
	Name  string              `json:"name"`
	Quota *domain.TenantQuota `json:"quota,omitempty"`
	Sites []string            `json:"sites,omitempty"`
}

// CmdTenantUpdate changes a tenant's quota and sites.
const CmdTenantUpdate CommandType = "tenant.update"

func (f *FSM) applyTenantUpdate(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantUpdate](c)
	if derr != nil {
		return nil, derr
	}
	old, ok := f.d.Tenants[p.Name]
	if !ok {
		return nil, domain.NotFound("tenant", p.Name)
	}
	t := *old
	t.Quota, t.Sites = p.Quota, p.Sites
	if err := domain.ValidateTenant(&t); err != nil {
		return nil, err
	}
	newG := f.workspaceGuarantees(t.Name)
	if t.Quota != nil {
		if ws := f.workspaceGuarantees(t.Name); ws > t.Quota.Guaranteed {
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "quota.guaranteed",
				Message: fmt.Sprintf("tenant %s's workspaces guarantee %d GPUs; the tenant quota cannot be lower (%d)", t.Name, ws, t.Quota.Guaranteed)}
		}
		newG = t.Quota.Guaranteed
	}
	if err := f.checkCapacity("quota.guaranteed", newG-f.tenantGuarantee(t.Name)); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	f.d.Tenants[t.Name] = &t
	f.event(c, "tenant.update", "tenant/"+t.Name, t.Name, "", tenantString(&t))
	cp := t
	return &cp, nil
}

func (f *FSM) applyTenantDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantDelete](c)
	if derr != nil {
		return nil, derr
	}
	t, ok := f.d.Tenants[p.Name]
	if !ok {
		return nil, domain.NotFound("tenant", p.Name)
	}
	var ws []string
	for _, w := range f.d.Workspaces {
		if w.Tenant == p.Name {
			ws = append(ws, w.Name)
		}
	}
	if len(ws) > 0 {
		sort.Strings(ws)
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "tenant %q still has workspaces %v: delete them first", p.Name, ws)
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Tenants, p.Name)
	for id, tok := range f.d.Tokens {
		if tok.Tenant == p.Name {
			delete(f.d.Tokens, id)
		}
	}
	f.event(c, "tenant.delete", "tenant/"+p.Name, p.Name, "", "tenant and its tokens removed")
	return t, nil
}

// checkGuarantee refuses a workspace guarantee change of delta GPUs in
// tenant that would overcommit the tenant's quota or the inventory.
func (f *FSM) checkGuarantee(field, tenant string, delta int) *domain.Error {
	if delta <= 0 {
		return nil
	}
	if t := f.d.Tenants[tenant]; t != nil && t.Quota != nil {
		if ws := f.workspaceGuarantees(tenant) + delta; ws > t.Quota.Guaranteed {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
				Message: fmt.Sprintf("tenant %s guarantees %d GPUs; its workspaces' guarantees would total %d", tenant, t.Quota.Guaranteed, ws)}
		}
		return nil // inside the tenant's reservation
	}
	return f.checkCapacity(field, delta)
}

func (f *FSM) checkCapacity(field string, delta int) *domain.Error {
	if g := f.totalGuaranteed() + delta; delta > 0 && g > f.cap.total {
		return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
			Message: fmt.Sprintf("guarantees would total %d GPUs but the inventory has %d: guarantees are never overcommitted", g, f.cap.total)}
	}
	return nil
}

// checkModelGuarantees refuses model quotas whose guarantees, with every
// other workspace's on the same model, exceed that model's GPUs in the
// inventory (replacing the workspace's own when it exists).
func (f *FSM) checkModelGuarantees(w *domain.Workspace, byModel map[string]int) *domain.Error {
	for i, q := range w.Models {
		total := q.Guaranteed
		for ref, o := range f.d.Workspaces {
			if ref == w.Ref() {
				continue
			}
			if oq := o.Model(q.Model); oq != nil {
				total += oq.Guaranteed
			}
		}
		if have := byModel[q.Model]; total > have {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: fmt.Sprintf("models[%d].guaranteed", i),
				Message: fmt.Sprintf("guarantees on %s would total %d GPUs but the inventory has %d: guarantees are never overcommitted", q.Model, total, have)}
		}
	}
	return nil
}

func (f *FSM) applyWorkspaceCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceCreate](c)
	if derr != nil {
		return nil, derr
	}
	w := p.Workspace
	if err := domain.ValidateWorkspace(&w); err != nil {
		return nil, err
	}
	if _, ok := f.d.Tenants[w.Tenant]; !ok {
		return nil, domain.NotFound("tenant", w.Tenant)
	}
	if _, ok := f.d.Workspaces[w.Ref()]; ok {
		return nil, &domain.Error{Code: domain.CodeAlreadyExists, Field: "name", Message: fmt.Sprintf("workspace %q already exists", w.Ref())}
	}
	if err := f.checkGuarantee("guaranteed", w.Tenant, w.Guaranteed); err != nil {
		return nil, err
	}
	if err := f.checkModelGuarantees(&w, f.cap.byModel); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	w.CreatedAt, w.CreatedBy = c.At, c.Actor
	f.d.Workspaces[w.Ref()] = &w
	f.event(c, "workspace.create", "workspace/"+w.Ref(), w.Tenant, w.Name, quotaString(&w))
	cp := w
	return &cp, nil
}

func quotaString(w *domain.Workspace) string {
	return fmt.Sprintf("guaranteed=%d borrowLimit=%d lendLimit=%d weight=%d priority=%d", w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight, w.Priority)
}

func (f *FSM) applyWorkspaceUpdate(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceUpdate](c)
	if derr != nil {
		return nil, derr
	}
	w := p.Workspace
	if err := domain.ValidateWorkspace(&w); err != nil {
		return nil, err
	}
	old, ok := f.d.Workspaces[w.Ref()]
	if !ok {
		return nil, domain.NotFound("workspace", w.Ref())
	}
	if err := f.checkGuarantee("guaranteed", w.Tenant, w.Guaranteed-old.Guaranteed); err != nil {
		return nil, err
	}
	if err := f.checkModelGuarantees(&w, f.cap.byModel); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	w.CreatedAt, w.CreatedBy = old.CreatedAt, old.CreatedBy
	f.d.Workspaces[w.Ref()] = &w
	f.event(c, "workspace.update", "workspace/"+w.Ref(), w.Tenant, w.Name, quotaString(&w))
	cp := w
	return &cp, nil
}

func (f *FSM) applyWorkspaceDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceDelete](c)
	if derr != nil {
		return nil, derr
	}
	ref := domain.Ref(p.Tenant, p.Name)
	w, ok := f.d.Workspaces[ref]
	if !ok {
		return nil, domain.NotFound("workspace", ref)
	}
	for _, j := range f.sortedJobs() {
		if j.Tenant == p.Tenant && j.Workspace == p.Name && !j.State.Terminal() {
			return nil, domain.Errorf(domain.CodeFailedPrecondition, "workspace %q has %s job %d: cancel its jobs first", ref, j.State, j.ID)
		}
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Workspaces, ref)
	for id, tok := range f.d.Tokens {
		if tok.Tenant == p.Tenant && tok.Workspace == p.Name {
			delete(f.d.Tokens, id)
		}
	}
	f.event(c, "workspace.delete", "workspace/"+ref, p.Tenant, p.Name, "workspace and its member tokens removed")
	return w, nil
}

func (f *FSM) applyTokenCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[TokenCreate](c)
	if derr != nil {
		return nil, derr
	}
	t := p.Token
	if err := domain.ValidateTokenScope(t.Role, t.Tenant, t.Workspace); err != nil {
		return nil, err
	}
	if err := domain.ValidateTokenNode(t.Role, t.Tenant, t.Node); err != nil {
		return nil, err
	}
	if len(p.Hash) != 64 {
		return nil, domain.Errorf(domain.CodeInternal, "token hash must be a hex SHA-256")
	}
	if t.Tenant != "" {
		if _, ok := f.d.Tenants[t.Tenant]; !ok {
			return nil, domain.NotFound("tenant", t.Tenant)
		}
	}
	if t.Workspace != "" {
		if _, ok := f.d.Workspaces[domain.Ref(t.Tenant, t.Workspace)]; !ok {
			return nil, domain.NotFound("workspace", domain.Ref(t.Tenant, t.Workspace))
		}
	}
	if _, ok := f.d.Tokens[t.ID]; ok {
		return nil, domain.Errorf(domain.CodeAlreadyExists, "token %q already exists", t.ID)
	}
	if t.ExpiresAt != nil && !t.ExpiresAt.After(c.At) {
		return nil, domain.Invalid("ttlSeconds", "token would expire at %s, not after its creation at %s", t.ExpiresAt.UTC().Format(time.RFC3339), c.At.UTC().Format(time.RFC3339))
	}
	t.LastUsedAt = nil
	if c.check {
		return nil, nil
	}
	t.CreatedAt, t.CreatedBy = c.At, c.Actor
	f.d.Tokens[t.ID] = &storedToken{Token: t, Hash: p.Hash}
	f.event(c, "token.create", "token/"+t.ID, t.Tenant, t.Workspace, "role="+string(t.Role))
	return &t, nil
}

func (f *FSM) applyTokenDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[TokenDelete](c)
	if derr != nil {
		return nil, derr
	}
	t, ok := f.d.Tokens[p.ID]
	if !ok {
		return nil, domain.NotFound("token", p.ID)
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Tokens, p.ID)
	f.event(c, "token.delete", "token/"+p.ID, t.Tenant, t.Workspace, "role="+string(t.Role))
	tok := t.Token
	return &tok, nil
}

// applyTokensUsed records last-use times; no audit event (a use is not a
// change anyone needs to review, and one per minute per token would bury
// the trail).
func (f *FSM) applyTokensUsed(c *Command) (any, *domain.Error) {
	p, derr := decode[TokensUsed](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	n := 0
	for _, id := range slices.Sorted(maps.Keys(p.Used)) {
		t, ok := f.d.Tokens[id]
		at := p.Used[id].UTC()
		if !ok || (t.LastUsedAt != nil && !at.After(*t.LastUsedAt)) {
			continue
		}
		t.LastUsedAt = &at
		n++
	}
	return n, nil
}

func (f *FSM) applyJobSubmit(c *Command) (any, *domain.Error) {
	p, derr := decode[JobSubmit](c)
	if derr != nil {
		return nil, derr
	}
	s := p.Spec
	// Keys are scoped to the caller: another token's key never finds this job.
	key := ""
	if p.IdempotencyKey != "" {
		key = c.Actor + " " + p.IdempotencyKey
	}
	if id, seen := f.d.SubmitKeys[key]; seen && key != "" {
		if j, ok := f.d.Jobs[id]; ok {
			return copyJob(j), nil
		}
	}
	if err := domain.ValidateJobSpec(&s); err != nil {
		return nil, err
	}
	if err := f.checkSubmit(&s); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	id := f.d.NextJobID
	f.d.NextJobID++
	if s.Name == "" {
		s.Name = fmt.Sprintf("job-%d", id)
	}
	j := &domain.Job{
		ID: id, JobSpec: s, State: domain.JobPending,
		Reason:      &domain.Reason{Code: domain.ReasonQueued, Message: "queued: waiting for the next scheduling cycle"},
		SubmittedAt: c.At, SubmittedBy: c.Actor, UpdatedAt: c.At,
	}
	f.d.Jobs[id] = j
	if key != "" {
		f.rememberSubmitKey(key, id)
	}
	f.event(c, "job.submit", fmt.Sprintf("job/%d", id), s.Tenant, s.Workspace, s.Name+": "+demandString(&s))
	return copyJob(j), nil
}

// maxSubmitKeys bounds the idempotency window: a client retries within
// seconds, and 100k submits are many minutes of the heaviest load.
const maxSubmitKeys = 100_000

func (f *FSM) rememberSubmitKey(key string, id uint64) {
	f.d.SubmitKeys[key] = id
	f.d.SubmitKeyOrder = append(f.d.SubmitKeyOrder, key)
	if len(f.d.SubmitKeyOrder) > maxSubmitKeys {
		delete(f.d.SubmitKeys, f.d.SubmitKeyOrder[0])
		f.d.SubmitKeyOrder = f.d.SubmitKeyOrder[1:]
	}
}

func (f *FSM) checkSubmit(s *domain.JobSpec) *domain.Error {
	w, ok := f.d.Workspaces[domain.Ref(s.Tenant, s.Workspace)]
	if !ok {
		return &domain.Error{Code: domain.CodeNotFound, Field: "workspace", Message: fmt.Sprintf("workspace %q not found", domain.Ref(s.Tenant, s.Workspace))}
	}
	if err := f.checkExternalID(s); err != nil {
		return err
	}
	return f.checkFits(s, w)
}

// checkFits refuses a job that could never be admitted, whatever else runs:
// better an error now than a job pending forever.
func (f *FSM) checkFits(s *domain.JobSpec, w *domain.Workspace) *domain.Error {
	if s.Driver != "" {
		found := false
		for _, srv := range f.cap.servers {
			if cmp, ok := domain.CompareVersions(srv.Driver, s.Driver); ok && cmp == 0 {
				found = true
				break
			}
		}
		if !found {
			return domain.Invalid("driver", "no server in the inventory declares driver %s", s.Driver)
		}
	}
	models := s.Models()
	accepts := func(m string) bool { return len(models) == 0 || slices.Contains(models, m) }
	what := "GPUs"
	if len(models) > 0 {
		what = strings.Join(models, " or ") + " GPUs"
		inInventory := false
		for _, m := range models {
			inInventory = inInventory || f.cap.byModel[m] > 0
		}
		if !inInventory {
			field := "gpuModel"
			if len(s.GPUModels) > 0 {
				field = "gpuModels"
			}
			return domain.Invalid(field, "the inventory has no %s", what)
		}
	}
	if s.MIGProfile != "" || s.Share > 0 {
		return f.checkFitsFractional(s, w, accepts, what)
	}
	if max := w.Guaranteed + w.BorrowLimit; s.GPUs > max {
		return domain.Invalid("gpus", "gpus %d exceeds what workspace %s may ever use (guaranteed %d + borrowLimit %d = %d)", s.GPUs, w.Ref(), w.Guaranteed, w.BorrowLimit, max)
	}
	// A gang runs on one model: the largest model it accepts bounds it, and
	// so do the workspace's model quotas.
	have, quotaMax, capped := 0, 0, true
	for m, n := range f.cap.byModel {
		if !accepts(m) {
			continue
		}
		have = max(have, n)
		if q := w.Model(m); q != nil {
			quotaMax = max(quotaMax, q.Guaranteed+q.BorrowLimit)
		} else if n > 0 {
			capped = false
		}
	}
	if s.GPUs > have {
		return domain.Invalid("gpus", "gpus %d exceeds the inventory's %d %s (a gang runs on one model)", s.GPUs, have, what)
	}
	if capped && s.GPUs > quotaMax {
		return domain.Invalid("gpus", "gpus %d exceeds what workspace %s may use of %s under its model quotas (at most %d)", s.GPUs, w.Ref(), what, quotaMax)
	}
	if s.GPUsPerNode > 0 {
		most := 0
		for m, n := range f.cap.maxPerServer {
			if accepts(m) && n > most {
				most = n
			}
		}
		if s.GPUsPerNode > most {
			return domain.Invalid("gpusPerNode", "gpusPerNode %d exceeds the largest server's %d %s", s.GPUsPerNode, most, what)
		}
	}
	return nil
}

// checkFitsFractional: a MIG profile must exist on a GPU model the
// inventory has (one the job accepts), a MIG request must fit the GPUs of
// one server, and the demand must fit the workspace's limit.
func (f *FSM) checkFitsFractional(s *domain.JobSpec, w *domain.Workspace, accepts func(string) bool, what string) *domain.Error {
	units, err := sched.Demand(s)
	if err != nil {
		return asDomainError(err)
	}
	field := "share"
	if s.MIGProfile != "" {
		field = "migCount"
		fits := false
		for m, per := range f.cap.maxPerServer {
			if !accepts(m) {
				continue
			}
			if p, err := mig.Lookup(m, s.MIGProfile); err == nil && s.MIGCount <= per*p.MaxInstances {
				fits = true
			}
		}
		if !fits {
			return domain.Invalid("migProfile", "no server in the inventory can hold %d x MIG %s of %s", s.MIGCount, s.MIGProfile, what)
		}
	} else if f.cap.total == 0 {
		return domain.Invalid("share", "the inventory has no GPUs")
	}
	if max := (w.Guaranteed + w.BorrowLimit) * domain.UnitsPerGPU; units > max {
		return domain.Invalid(field, "the request (%.2f GPUs) exceeds what workspace %s may ever use (guaranteed %d + borrowLimit %d)",
			float64(units)/domain.UnitsPerGPU, w.Ref(), w.Guaranteed, w.BorrowLimit)
	}
	return nil
}

// demandString says what a job asks for: "16 GPUs", "2 x MIG 3g.40gb",
// "0.25 of a GPU".
func demandString(s *domain.JobSpec) string {
	switch {
	case s.MIGProfile != "":
		return fmt.Sprintf("%d x MIG %s", s.MIGCount, s.MIGProfile)
	case s.Share > 0:
		return fmt.Sprintf("%g of a GPU", s.Share)
	}
	return fmt.Sprintf("%d GPUs", s.GPUs)
}

func (f *FSM) applyJobCancel(c *Command) (any, *domain.Error) {
	p, derr := decode[JobCancel](c)
	if derr != nil {
		return nil, derr
	}
	j, ok := f.d.Jobs[p.ID]
	if !ok {
		return nil, domain.NotFound("job", fmt.Sprint(p.ID))
	}
	if j.State.Terminal() {
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "job %d is already %s", j.ID, j.State)
	}
	if c.check {
		return nil, nil
	}
	f.end(j, domain.JobCancelled, &domain.Reason{Code: "cancelled", Message: "cancelled by " + c.Actor}, c.At)
	j.UpdatedAt = c.At
	f.event(c, "job.cancel", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, j.Name)
	return copyJob(j), nil
}

// PlanResult says which entries of a plan were committed and which the
// re-check refused (the job is rescheduled in a later cycle). The older
// jobs.release and jobs.preempt commands list what they committed in
// Placed; plan.apply lists releases and preemptions apart.
type PlanResult struct {
	Placed    []uint64          `json:"placed"`
	Released  []uint64          `json:"released,omitempty"`
	Preempted []uint64          `json:"preempted,omitempty"`
	Rejected  map[uint64]string `json:"rejected,omitempty"`
}

// applyPlan commits one scheduling cycle's plan (PlanApply) in one entry:
// due releases, preemptions, then placements re-checked against the state
// the releases left, then the reasons of the jobs left pending. Each entry
// that no longer holds is refused alone; the rest commits.
func (f *FSM) applyPlan(c *Command) (any, *domain.Error) {
	p, derr := decode[PlanApply](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	for _, r := range p.Releases {
		if why := f.releaseJob(c, r); why != "" {
			res.Rejected[r.JobID] = why
		} else {
			res.Released = append(res.Released, r.JobID)
		}
	}
	for _, pr := range p.Preemptions {
		if why := f.preemptJob(c, pr); why != "" {
			res.Rejected[pr.JobID] = why
		} else {
			res.Preempted = append(res.Preempted, pr.JobID)
		}
	}
	f.placeJobs(c, p.Placements, p.Reasons, p.NetworkGate, res)
	return res, nil
}

// applyJobsPlace applies the placements of a plan committed before
// plan.apply existed (entries in older logs).
func (f *FSM) applyJobsPlace(c *Command) (any, *domain.Error) {
	p, derr := decode[JobsPlace](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	pls := make([]sched.Placement, len(p.Jobs))
	for i, jp := range p.Jobs {
		pls[i] = sched.Placement{JobID: jp.ID, Placement: jp.Placements}
	}
	f.placeJobs(c, pls, p.Reasons, p.NetworkGate, res)
	return res, nil
}

// placeJobs is the plan applier: it re-checks every placement with the
// scheduler's own fit rule (sched.Fit) against the state it applies to,
// in the plan's order, commits those that hold and refuses the rest one by
// one: a refused job stays Pending with the reason. Until the network gate
// exists a placed job is Ready at once.
func (f *FSM) placeJobs(c *Command, pls []sched.Placement, reasons map[uint64]domain.Reason, networkGate bool, res *PlanResult) {
	if len(pls) > 0 {
		// The scheduler's view of this state at the command's time: the
		// jobs as it sees them (a tenant's minimum driver folded in). Fit
		// only reads them, so a shallow copy serves: the fold changes a
		// field of the copy, never a shared slice.
		snap := f.schedSnapshot(c.At, func(j *domain.Job) *domain.Job { cp := *j; return &cp })
		fit := sched.NewFit(snap, c.At)
		seen := make(map[uint64]*domain.Job, len(snap.Jobs))
		for _, j := range snap.Jobs {
			seen[j.ID] = j
		}
		for _, jp := range pls {
			f.placeJob(c, fit, seen[jp.JobID], jp, networkGate, res)
		}
	}
	for id, r := range reasons {
		if _, refused := res.Rejected[id]; refused {
			continue // the re-check's reason is the newer one
		}
		if j, ok := f.d.Jobs[id]; ok && j.State == domain.JobPending && (j.Reason == nil || *j.Reason != r) {
			r := r
			j.Reason, j.UpdatedAt = &r, c.At
		}
	}
}

// placeJob commits one placement if it still fits; seen is the job as the
// scheduler's view of this state has it.
func (f *FSM) placeJob(c *Command, fit *sched.Fit, seen *domain.Job, jp sched.Placement, networkGate bool, res *PlanResult) {
	j, ok := f.d.Jobs[jp.JobID]
	if !ok {
		res.Rejected[jp.JobID] = "job not found"
		return
	}
	if j.State != domain.JobPending {
		res.Rejected[jp.JobID] = fmt.Sprintf("job is %s, not Pending", j.State)
		return
	}
	if r, ok := fit.Place(seen, jp.Placement); !ok {
		res.Rejected[jp.JobID] = r.Message
		j.Reason, j.UpdatedAt = &r, c.At
		return
	}
	at := c.At
	j.Placement, j.UpdatedAt, j.PlacedAt, j.NetworkRev = jp.Placement, c.At, &at, 0
	if networkGate {
		// Ready once the fabric revision carrying its network is
		// deployed on its leaves (fabric.go, gate).
		j.State = domain.JobPlaced
		j.Reason = &domain.Reason{Code: domain.ReasonNetwork, Message: "placed; waiting for the fabric to carry its tenant VRF, ports and group rules"}
	} else {
		j.State = domain.JobReady
		j.Reason = &domain.Reason{Code: "ready", Message: "placed; ready for its runtime to start it (no fabric driver: no network gate)"}
	}
	f.event(c, "job.place", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("%s on %s", demandString(&j.JobSpec), placementString(jp.Placement)))
	res.Placed = append(res.Placed, j.ID)
}

func placementString(pls []domain.Placement) string {
	parts := make([]string, len(pls))
	for i, p := range pls {
		parts[i] = fmt.Sprintf("%s%v", p.Server, p.GPUs)
	}
	return strings.Join(parts, " ")
}

func (f *FSM) applyMemberSet(c *Command) (any, *domain.Error) {
	p, derr := decode[MemberSet](c)
	if derr != nil {
		return nil, derr
	}
	m := p.Member
	if m.ID == "" || m.RaftAddr == "" {
		return nil, domain.Invalid("id", "member needs an id and a raft address")
	}
	if c.check {
		return nil, nil
	}
	if old, ok := f.d.Members[m.ID]; ok && old == m {
		return &m, nil
	}
	f.d.Members[m.ID] = m
	f.event(c, "member.set", "member/"+m.ID, "", "", fmt.Sprintf("raft=%s api=%s", m.RaftAddr, m.APIAddr))
	return &m, nil
}

func (f *FSM) sortedJobs() []*domain.Job {
	out := make([]*domain.Job, 0, len(f.d.Jobs))
	for _, j := range f.d.Jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

func copyJob(j *domain.Job) *domain.Job {
	cp := *j
	cp.GPUModels = slices.Clone(j.GPUModels)
	if j.Topology != nil {
		t := *j.Topology
		cp.Topology = &t
	}
	if j.Reason != nil {
		r := *j.Reason
		cp.Reason = &r
	}
	if j.Placement != nil {
		cp.Placement = make([]domain.Placement, len(j.Placement))
		for i, p := range j.Placement {
			cp.Placement[i] = domain.Placement{Server: p.Server, GPUs: append([]int(nil), p.GPUs...), MIG: append([]domain.MIGSlice(nil), p.MIG...),
				Share: p.Share, NVLinkDomain: p.NVLinkDomain, Leaves: append([]string(nil), p.Leaves...)}
		}
	}
	return &cp
}
