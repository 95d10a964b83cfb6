package state

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// CommandType names a command in the log. Values are stable: they are in
// every persisted log and snapshot.
type CommandType string

const (
	CmdTopologyApply CommandType = "topology.apply"
	CmdTenantCreate  CommandType = "tenant.create"
	CmdTenantDelete  CommandType = "tenant.delete"
	// CmdTenantUpdate changes a tenant's quota and sites.
	CmdTenantUpdate    CommandType = "tenant.update"
	CmdWorkspaceCreate CommandType = "workspace.create"
	CmdWorkspaceUpdate CommandType = "workspace.update"
	CmdWorkspaceDelete CommandType = "workspace.delete"
	CmdTokenCreate     CommandType = "token.create"
	CmdTokenDelete     CommandType = "token.delete"
	CmdTokensUsed      CommandType = "tokens.used"
	CmdJobSubmit       CommandType = "job.submit"
	CmdJobCancel       CommandType = "job.cancel"
	CmdJobsPlace       CommandType = "jobs.place"
	CmdPlanApply       CommandType = "plan.apply"
	CmdMemberSet       CommandType = "member.set"
)

// Command is the envelope of every log entry. At and Actor are decided by the
// proposer (the API server) so that apply stays deterministic.
type Command struct {
	Type    CommandType     `json:"type"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Payload json.RawMessage `json:"payload"`
	// Rules is the apply-rules version the leader proposed the command
	// under (rules.go); every member applies it under that version's
	// rules. Absent (0) in entries written before versions existed: 1.
	Rules int `json:"rules,omitempty"`
	// check is set by FSM.Check: the handler stops, with a nil value,
	// where its checks end and its changes begin (see handler).
	check bool
}

// Payloads.
type (
	TopologyApply struct {
		Topology domain.Topology `json:"topology"`
	}
	TenantCreate struct {
		Tenant domain.Tenant `json:"tenant"`
	}
	// TenantUpdate replaces a tenant's quota and sites (isolation and network
	// model cannot change under running jobs).
	TenantUpdate struct {
		Name  string              `json:"name"`
		Quota *domain.TenantQuota `json:"quota,omitempty"`
		Sites []string            `json:"sites,omitempty"`
	}
	TenantDelete struct {
		Name string `json:"name"`
	}
	WorkspaceCreate struct {
		Workspace domain.Workspace `json:"workspace"`
	}
	// WorkspaceUpdate replaces the quota fields of an existing workspace.
	WorkspaceUpdate struct {
		Workspace domain.Workspace `json:"workspace"`
	}
	WorkspaceDelete struct {
		Tenant string `json:"tenant"`
		Name   string `json:"name"`
	}
	TokenCreate struct {
		Token domain.Token `json:"token"`
		// Hash is carried separately because Token.Hash is never serialised to clients.
		Hash string `json:"hash"`
	}
	TokenDelete struct {
		ID string `json:"id"`
	}
	// TokensUsed records when tokens last authenticated a request (the
	// leader's batch, server/tokenuse.go). A later time replaces an
	// earlier one; unknown (revoked) tokens are skipped.
	TokensUsed struct {
		Used map[string]time.Time `json:"used"`
	}
	JobSubmit struct {
		Spec domain.JobSpec `json:"spec"`
		// IdempotencyKey, when set, makes a retried submit return the job
		// the first attempt created instead of a second job.
		IdempotencyKey string `json:"idempotencyKey,omitempty"`
	}
	JobCancel struct {
		ID uint64 `json:"id"`
	}
	// PlanApply commits one scheduling cycle's plan, in the scheduler's own
	// types: due releases, then preemptions, then placements, each
	// placement re-checked with sched.Fit against the state the releases
	// left (the plan applier), then the reasons of pending jobs it did not
	// place (those that changed).
	PlanApply struct {
		Releases    []sched.Release          `json:"releases,omitempty"`
		Preemptions []sched.Preemption       `json:"preemptions,omitempty"`
		Placements  []sched.Placement        `json:"placements,omitempty"`
		Reasons     map[uint64]domain.Reason `json:"reasons,omitempty"`
		// NetworkGate: placed jobs wait (Placed) for the fabric revision
		// carrying their network to be deployed before they are Ready.
		NetworkGate bool `json:"networkGate,omitempty"`
	}
	// JobsPlace commits a plan's placements: the command leaders wrote
	// before plan.apply, still applied from older logs.
	JobsPlace struct {
		Jobs []JobPlacement `json:"jobs"`
		// Reasons explain pending jobs the plan did not place.
		Reasons map[uint64]domain.Reason `json:"reasons,omitempty"`
		// NetworkGate: placed jobs wait (Placed) for the fabric revision
		// carrying their network to be deployed before they are Ready.
		NetworkGate bool `json:"networkGate,omitempty"`
	}
	JobPlacement struct {
		ID         uint64             `json:"id"`
		Placements []domain.Placement `json:"placements"`
	}
	// MemberSet records a server of the cluster and where its API listens, so
	// followers can forward requests to the leader.
	MemberSet struct {
		Member Member `json:"member"`
	}
)

// Member is one server of the control-plane cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr"`
	// Rules is the highest apply-rules version the member's binary
	// applies (rules.go): the leader proposes at the lowest of its
	// members'. Absent for members recorded by binaries older than
	// versions, which apply 1.
	Rules int `json:"rules,omitempty"`
}

// Report outcomes a runtime may send.
const (
	ReportRunning   = "running"
	ReportSucceeded = "succeeded"
	ReportFailed    = "failed"
	// ReportStopped: a Preempting job has stopped; its GPUs may go.
	ReportStopped = "stopped"
	// ReportRejected: the runtime cannot start a Ready job on its
	// placement (a Slurm node down or drained): the job is requeued, its
	// GPUs freed, and placed again; not a failure of the job.
	ReportRejected = "rejected"
)

// Lifecycle payloads (lifecycle.go).
type (
	JobReport struct {
		ID      uint64 `json:"id"`
		State   string `json:"state"`
		Message string `json:"message,omitempty"`
	}
	// JobsPreempt tells running jobs to stop by Deadline (the command
	// before plan.apply, still applied from older logs).
	JobsPreempt struct {
		Jobs []Preemption `json:"jobs"`
	}
	Preemption struct {
		ID       uint64        `json:"id"`
		Reason   domain.Reason `json:"reason"`
		Deadline time.Time     `json:"deadline"`
		// ForJob is the pending job the GPUs are freed for.
		ForJob uint64 `json:"forJob,omitempty"`
		// BorrowBackoff keeps a reclaimed job from borrowing again until then.
		BorrowBackoff *time.Time `json:"borrowBackoff,omitempty"`
	}
	// JobsRelease ends allocations: Preempting jobs past their deadline,
	// jobs past their time limit (the command before plan.apply, still
	// applied from older logs).
	JobsRelease struct {
		Jobs []Release `json:"jobs"`
	}
	Release struct {
		ID uint64 `json:"id"`
		// Cause: "deadline" (a Preempting job's grace ran out) or
		// "time_limit".
		Cause string `json:"cause"`
	}
)

// Lifecycle commands (lifecycle.go).
const (
	CmdJobReport   CommandType = "job.report"
	CmdJobsPreempt CommandType = "jobs.preempt"
	CmdJobsRelease CommandType = "jobs.release"
)

// CmdNodeSet changes a server's condition (cordon, drain, health).
const CmdNodeSet CommandType = "node.set"

// NodeSet sets the fields it carries; nil leaves a field as it is.
type NodeSet struct {
	Server    string `json:"server"`
	Cordoned  *bool  `json:"cordoned,omitempty"`
	Draining  *bool  `json:"draining,omitempty"`
	Unhealthy *bool  `json:"unhealthy,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// GraceSeconds, with Draining true, tells the server's running jobs to
	// stop within this grace (0: the scheduler's preemption grace).
	GraceSeconds int64 `json:"graceSeconds,omitempty"`
}

// CmdNodeRuntime records a workload runtime's word on the servers it runs
// jobs on (nodes.go): a Slurm cluster's node states, from its bridge.
const CmdNodeRuntime CommandType = "node.runtime"

// NodeRuntime says Runtime cannot use the servers of Unusable (server:
// why) and can use those of Usable. An unusable server is cordoned for
// the runtime unless something else already keeps work off it; a usable
// one the runtime cordoned is uncordoned. Servers in neither list, or not
// in the inventory, are left as they are.
type NodeRuntime struct {
	Runtime  string            `json:"runtime"`
	Usable   []string          `json:"usable,omitempty"`
	Unusable map[string]string `json:"unusable,omitempty"`
}

// Fabric commands (fabric.go).
const (
	CmdFabricRevision CommandType = "fabric.revision"
	CmdFabricDeployed CommandType = "fabric.deployed"
	CmdFabricOptions  CommandType = "fabric.options"
	// CmdFabricOverride deploys a revision the verifier blocked.
	CmdFabricOverride CommandType = "fabric.override"
)

// Fabric payloads (fabric.go).
type (
	// FabricRevisionCmd commits a compiled revision. SyncAt is the time the
	// leader synced the id pools at; the state machine syncs again at that
	// time and refuses the revision when the result differs from IDsHash
	// (the state changed in between: the leader compiles again).
	FabricRevisionCmd struct {
		SyncAt  time.Time               `json:"syncAt"`
		IDsHash string                  `json:"idsHash"`
		Cause   string                  `json:"cause,omitempty"`
		Changed map[string]DeviceConfig `json:"changed,omitempty"`
		Removed []string                `json:"removed,omitempty"`
		Jobs    []uint64                `json:"jobs,omitempty"` // jobs whose allocations the revision carries
		InUse   fabric.InUse            `json:"inUse"`
		Verify  []string                `json:"verify,omitempty"` // verifier failures, for the record
		// Ports are the server ports whose membership the revision
		// changes ("leaf/port" -> PortMembership of the port, "" for none).
		Ports map[string]string `json:"ports,omitempty"`
		// Held are placed jobs whose allocations the revision leaves out:
		// a port of theirs still has (or only just lost) another
		// membership.
		Held []HeldJob `json:"held,omitempty"`
		// Blocked: the verifier failed on what no held job accounts for
		// (a tenant's VNI, RD or route target shared or imported, a
		// running job's port): the revision is kept for the record, no
		// device is given it, and the devices stay on the latest revision
		// that is not blocked. Absent in logs written before it: those
		// revisions were deployed whatever the verifier said.
		Blocked bool `json:"blocked,omitempty"`
	}
	// HeldJob is a job held out of a revision, and the port (or leaf) it
	// waits for.
	HeldJob struct {
		Job  uint64 `json:"job"`
		Port string `json:"port"`
		// Why: "moves" (the port leaves its old membership in this
		// revision), "deploying" (the removal is not deployed yet) or
		// "l3vlan" (the tenant's VRF would come to leaf Leaf, whose L3
		// VLAN pool has no id free now; Reason is the pool's account, for
		// the record and the revision's cause, never the job's reason: it
		// counts other tenants' VLANs) or "verify" (the verifier failed on
		// the configuration the job's port Port, or the job itself, would
		// get; Rule is the verifier's rule and Reason the failure, which
		// may name other tenants: for the admin, never the job's reason).
		Why    string `json:"why"`
		Leaf   string `json:"leaf,omitempty"`
		Reason string `json:"reason,omitempty"`
		Rule   string `json:"rule,omitempty"`
	}
	// FabricOverrideCmd lets the devices have blocked revision Rev (the
	// latest) although the verifier failed on it: an admin's decision,
	// with its reason, in the events.
	FabricOverrideCmd struct {
		Rev    uint64 `json:"rev"`
		Reason string `json:"reason"`
	}
	// FabricOptionsSet replaces the operator's fabric options (see
	// FabricOptions); zero values mean the defaults.
	FabricOptionsSet struct {
		Options FabricOptions `json:"options"`
	}
	// FabricDeployedCmd records a deploy of revision Rev.
	FabricDeployedCmd struct {
		Rev     uint64         `json:"rev"`
		Results []DeployResult `json:"results"`
	}
	// DeployResult is one device's outcome: applied whole, or not at all.
	DeployResult struct {
		Device string `json:"device"`
		Hash   string `json:"hash"`
		Error  string `json:"error,omitempty"`
		// Conditions are what the driver found on the switch: missing
		// preparations, disruptive changes applied.
		Conditions []domain.SwitchCondition `json:"conditions,omitempty"`
	}
)

// Host commands (hosts.go).
const (
	CmdHostReport    CommandType = "host.report"
	CmdHostHeartbeat CommandType = "host.heartbeat"
	CmdHostAccept    CommandType = "host.accept"
	CmdHostPolicy    CommandType = "host.policy"
)

// Host payloads (hosts.go).
type (
	// HostReport is an agent's facts about its node.
	HostReport struct {
		Node  string           `json:"node"`
		Agent string           `json:"agent,omitempty"`
		Facts domain.HostFacts `json:"facts"`
		// Hash is hostfacts.Fingerprint(Facts), computed by the proposer.
		Hash string `json:"hash"`
	}
	// HostHeartbeat marks nodes whose agent went silent (Lost) or is heard
	// again. The leader decides; apply records.
	HostHeartbeat struct {
		Nodes []string `json:"nodes"`
		Lost  bool     `json:"lost"`
		// LastSeen is when each lost node was last heard (for the message).
		LastSeen map[string]time.Time `json:"lastSeen,omitempty"`
		// TimeoutSeconds is the policy's timeout the leader applied.
		TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
	}
	// HostAccept pins a node's current GPUs as its baseline (after a GPU
	// was replaced on purpose).
	HostAccept struct {
		Node string `json:"node"`
	}
	// HostPolicySet replaces the host policy.
	HostPolicySet struct {
		Policy domain.HostPolicy `json:"policy"`
	}
)

// Log entry bounds.
//
// MaxEntryBytes is the most one raft log entry may hold, as stored. Raft
// keeps recent entries in memory (the log cache), sends each whole to every
// follower in one AppendEntries and replays every entry at each start, so
// an unbounded entry costs memory and restart time long after it was
// written. Encode refuses a larger command with payload_too_large (HTTP
// 413) naming this limit.
//
// A command above compressAbove is stored gzip-compressed (a JSON command
// starts with '{', a compressed one with the gzip magic 1f 8b, so entries
// written before compression existed still decode). Compression, rather
// than a staged upload, because the only large command is a whole
// topology, which is regular text: a 100,000-GPU topology (12,500 servers,
// 100,000 cables) encodes to about 21 MB of JSON and 1.5 MB compressed, so
// it fits one entry and stays one atomic apply with nothing to clean up.
// maxCommandBytes bounds a command once decompressed, so a corrupt or
// hostile entry cannot expand without limit in the state machine.
const (
	MaxEntryBytes   = 8 << 20
	maxCommandBytes = 256 << 20
	compressAbove   = 64 << 10
)

// Encode builds the log entry for a command payload under RulesLatest
// (the simulator, tests: a state machine of this binary alone). A leader
// proposes with EncodeRules, at the version its members apply.
func Encode(t CommandType, at time.Time, actor string, payload any) ([]byte, error) {
	return EncodeRules(t, RulesLatest, at, actor, payload)
}

// EncodeRules builds the log entry for a command payload proposed under
// apply rules version rules: compressed above compressAbove, refused above
// MaxEntryBytes.
func EncodeRules(t CommandType, rules int, at time.Time, actor string, payload any) ([]byte, error) {
	_, b, err := EncodeCommand(t, rules, at, actor, payload)
	return b, err
}

// EncodeCommand is EncodeRules that also returns the command the entry
// decodes to, for FSM.CheckCommand: the leader checks what it proposes
// without decoding the bytes it has just encoded (issue 18: the leader's
// bytes per command). The command is the one decodeCommand reads from
// the entry (TestEncodeCommandIsDecoded): its payload is the JSON in the
// entry, and a type or actor JSON would not carry as is (not UTF-8) is
// read back from the entry.
func EncodeCommand(t CommandType, rules int, at time.Time, actor string, payload any) (Command, []byte, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return Command{}, nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	c := Command{Type: t, At: at.UTC(), Actor: actor, Payload: p, Rules: rules}
	b, err := encodeEntry(&c)
	if err != nil {
		return Command{}, nil, err
	}
	if !utf8.ValidString(string(t)) || !utf8.ValidString(actor) {
		// json replaced the invalid bytes: the state machine sees those.
		var derr *domain.Error
		if c, derr = decodeCommand(b); derr != nil {
			return Command{}, nil, derr
		}
	}
	return c, b, nil
}

// encodeEntry is the log entry of c: its JSON, compressed above
// compressAbove; refused above MaxEntryBytes.
func encodeEntry(c *Command) ([]byte, error) {
	t := c.Type
	if len(c.Payload) < compressAbove {
		// Small (a submit): copying the payload costs less than
		// cutting the envelope.
		b, err := json.Marshal(c)
		if err != nil || len(b) <= compressAbove {
			return b, err
		}
		return compress(t, b)
	}
	head, tail, err := envelope(c)
	if err != nil {
		return nil, err
	}
	return compress(t, head, c.Payload, tail)
}

// compress is the gzip entry of the command whose JSON is parts, in
// order; refused above MaxEntryBytes.
func compress(t CommandType, parts ...[]byte) ([]byte, error) {
	raw := 0
	for _, part := range parts {
		raw += len(part)
	}
	if raw > maxCommandBytes {
		return nil, tooLarge(t, raw, 0)
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer func() {
		zw.Reset(nil) // the pool keeps no reference to the entry
		gzipWriters.Put(zw)
	}()
	zw.Reset(&buf)
	for _, part := range parts {
		if _, err := zw.Write(part); err != nil {
			return nil, fmt.Errorf("compress %s: %w", t, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress %s: %w", t, err)
	}
	if buf.Len() > MaxEntryBytes {
		return nil, tooLarge(t, raw, buf.Len())
	}
	return buf.Bytes(), nil
}

// envelope is the JSON of c around its payload: head ends with
// "payload":, tail follows the payload. c.Payload is what json.Marshal
// made of the payload (valid, compact, escaped as json escapes), which
// json.Marshal of c would copy unchanged: head, payload and tail are the
// bytes json.Marshal(c) makes (TestEncodeCommandIsDecoded), without a
// second copy of the payload, the size of a plan (issue 18).
func envelope(c *Command) (head, tail []byte, err error) {
	e := *c
	e.Payload = nil // "null"
	b, err := json.Marshal(&e)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s: %w", c.Type, err)
	}
	// The last: only rules, a number, follows. Not inside the type or
	// actor: json escapes the quotes of a string.
	const key, null = `"payload":`, `null`
	i := bytes.LastIndex(b, []byte(key+null))
	if i < 0 {
		return nil, nil, fmt.Errorf("encode %s: no payload in %s", c.Type, b)
	}
	return b[:i+len(key)], b[i+len(key)+len(null):], nil
}

// The gzip writers and readers of big commands (the scheduler's plans,
// topologies) are reused: a writer's compressor is about 1 MB, a reader's
// 40 KB, and a leader proposes a plan every cycle and every member
// decodes it (issue 18: the leader's bytes allocated set how often its
// collector marks). Reset makes a pooled one equivalent to a new one:
// the bytes written are those of a fresh writer (TestGzipPoolSameBytes).
var (
	gzipWriters = sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // the level is valid
		return zw
	}}
	gzipReaders = sync.Pool{New: func() any { return new(inflater) }}
	// inflated holds the buffers compressed entries expand into: json
	// copies what it keeps (the payload's RawMessage, strings), so the
	// buffer is free once the entry is decoded. One grown past
	// maxPooledInflate (a topology) is left to the collector.
	inflated = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

const maxPooledInflate = 4 << 20

func tooLarge(t CommandType, raw, compressed int) *domain.Error {
	msg := fmt.Sprintf("the %s command is %d bytes", t, raw)
	if compressed > 0 {
		msg += fmt.Sprintf(" (%d compressed)", compressed)
	}
	return domain.Errorf(domain.CodePayloadTooLarge, "%s; one raft log entry holds at most %d bytes compressed and %d uncompressed (state.MaxEntryBytes): split the change or make the object smaller", msg, MaxEntryBytes, maxCommandBytes)
}

// decodeCommand reads a log entry written by Encode.
func decodeCommand(b []byte) (Command, *domain.Error) {
	var c Command
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		buf := inflated.Get().(*bytes.Buffer)
		defer func() {
			if buf.Cap() <= maxPooledInflate {
				buf.Reset()
				inflated.Put(buf)
			}
		}()
		if err := inflate(buf, b); err != nil {
			return c, domain.Errorf(domain.CodeInternal, "undecodable log entry: %v", err)
		}
		if buf.Len() > maxCommandBytes {
			return c, domain.Errorf(domain.CodeInternal, "log entry expands beyond %d bytes", maxCommandBytes)
		}
		b = buf.Bytes()
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, domain.Errorf(domain.CodeInternal, "undecodable log entry: %v", err)
	}
	return c, nil
}

// inflater is a pooled gzip reader and the reader of the entry it reads.
type inflater struct {
	src bytes.Reader
	zr  gzip.Reader
}

// inflate expands gzip entry b into buf, at most maxCommandBytes+1 bytes
// of it (the caller refuses more), with a pooled reader.
func inflate(buf *bytes.Buffer, b []byte) error {
	in := gzipReaders.Get().(*inflater)
	defer func() {
		in.src.Reset(nil) // the pool keeps no reference to the entry
		gzipReaders.Put(in)
	}()
	in.src.Reset(b)
	if err := in.zr.Reset(&in.src); err != nil {
		return err
	}
	_, err := buf.ReadFrom(io.LimitReader(&in.zr, maxCommandBytes+1))
	return err
}

// Result is what Apply returns for every command: the created or changed
// object, or the typed error that refused the command (state unchanged).
type Result struct {
	Value any
	Err   *domain.Error
	cmd   CommandType // what was applied, for FSM.Refused
}
