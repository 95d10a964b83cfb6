package domain

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JobState is where a job is in its life.
type JobState string

// Job states: Pending -> Placed (GPUs chosen) -> Ready (network and hosts
// set up; the runtime may start it) -> Running -> Succeeded | Failed |
// Cancelled; a running job told to stop goes Preempting -> Preempted.
const (
	JobPending    JobState = "Pending"
	JobPlaced     JobState = "Placed"
	JobReady      JobState = "Ready"
	JobRunning    JobState = "Running"
	JobPreempting JobState = "Preempting"
	JobPreempted  JobState = "Preempted"
	JobSucceeded  JobState = "Succeeded"
	JobFailed     JobState = "Failed"
	JobCancelled  JobState = "Cancelled"
)

// JobStates lists every state, in life order.
var JobStates = []JobState{JobPending, JobPlaced, JobReady, JobRunning, JobPreempting, JobPreempted, JobSucceeded, JobFailed, JobCancelled}

// Terminal reports whether a job in this state will never run again. A
// preempted job that is preemptible goes back to Pending instead, so a job
// that is Preempted stays so.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled || s == JobPreempted
}

// HoldsGPUs reports whether a job in this state holds the GPUs of its
// placement: from Placed until it ends, including while it is told to stop.
// Capacity, bindings and the fabric count exactly these jobs.
func (s JobState) HoldsGPUs() bool {
	return s == JobPlaced || s == JobReady || s == JobRunning || s == JobPreempting
}

// Stoppable reports whether a job in this state holds GPUs and has not yet
// been told to stop: the jobs a preemption, a drain or a time limit acts on.
func (s JobState) Stoppable() bool {
	return s == JobPlaced || s == JobReady || s == JobRunning
}

// Ended is Terminal: a job in such a state holds no GPUs and never will
// again. Watches stop here.
func (s JobState) Ended() bool { return s.Terminal() }

// ParseJobState reads a state's name in any case: "running" is Running.
func ParseJobState(name string) (JobState, bool) {
	for _, k := range JobStates {
		if strings.EqualFold(name, string(k)) {
			return k, true
		}
	}
	return "", false
}

// Valid reports whether s is a known state.
func (s JobState) Valid() bool {
	for _, k := range JobStates {
		if s == k {
			return true
		}
	}
	return false
}

// Reason explains why a job is where it is, in a structured form (code for
// programs, message for people).
type Reason struct {
	// Code is stable, for programs (queued, capacity, workspace_quota,
	// time_limit, ...).
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reservation, on a pending job that cannot be placed now, is when and
	// where the scheduler expects to start it: later jobs run on these GPUs
	// only if they end before then (backfill). It is advice recomputed every
	// cycle from the running jobs' time limits, expected durations or
	// history, not a hold on the GPUs.
	Reservation *Reservation `json:"reservation,omitempty"`
}

// Reservation is when and where a blocked job is expected to start.
type Reservation struct {
	// Start is the earliest time the job fits, by the estimates in Basis;
	// zero when that is as soon as running jobs past their estimated end
	// stop, or when it waits for running jobs with no known end (Basis
	// has unknown).
	Start time.Time `json:"start,omitzero"`
	// Placement is the GPUs it would take then.
	Placement []Placement `json:"placement"`
	// Basis names what the running jobs' ends were estimated from:
	// time_limit, expected_duration, history, preemption (a stop deadline),
	// unknown (jobs with none of these: taken to end after all the others,
	// those on the emptiest servers first).
	Basis []string `json:"basis"`
}

// Reservation bases: what a running job's end was estimated from.
const (
	BasisTimeLimit        = "time_limit"
	BasisExpectedDuration = "expected_duration"
	BasisHistory          = "history"
	BasisPreemption       = "preemption"
	BasisUnknown          = "unknown"
)

// Equal reports whether r and o say the same (a nil r equals nothing): a
// reason with a reservation holds a pointer, so == compares identities.
func (r *Reason) Equal(o Reason) bool {
	if r == nil || r.Code != o.Code || r.Message != o.Message {
		return false
	}
	a, b := r.Reservation, o.Reservation
	if a == nil || b == nil {
		return a == b
	}
	return a.Start.Equal(b.Start) && slices.Equal(a.Basis, b.Basis) && slices.EqualFunc(a.Placement, b.Placement, Placement.Equal)
}

// Equal reports whether p and o name the same GPUs, slices and share (a nil
// and an empty list are the same: JSON drops empty lists).
func (p Placement) Equal(o Placement) bool {
	return p.Server == o.Server && slices.Equal(p.GPUs, o.GPUs) && slices.Equal(p.MIG, o.MIG) && p.Share == o.Share &&
		p.NVLinkDomain == o.NVLinkDomain && slices.Equal(p.Leaves, o.Leaves)
}

// ReasonQueued is a new job's reason until a scheduling cycle has looked at it.
const ReasonQueued = "queued"

// ReasonNetwork is a Placed job's reason while the fabric revision carrying
// its tenant VRF, ports and group rules is not yet deployed on its leaves.
const ReasonNetwork = "network_pending"

// A field added to JobSpec must be added to appendJobJSON in
// internal/state (TestJobJSONAsMarshal). Not in the doc comment below: the
// API's document is made from it.

// JobSpec is what a user asks for.
type JobSpec struct {
	// Name is an optional label for people; jobs are known by their id.
	Name string `json:"name,omitempty"`
	// Tenant and Workspace say whose quota the job uses; a member token's
	// own workspace is the default for both.
	Tenant    string `json:"tenant"`
	Workspace string `json:"workspace"`
	// A job asks for whole GPUs (GPUs), or MIGCount slices of MIGProfile,
	// or Share of one GPU (time-sliced): exactly one of the three.
	GPUs int `json:"gpus,omitempty"`
	// MIGProfile (such as 3g.40gb) and MIGCount ask for MIG slices, all on
	// one server.
	MIGProfile string `json:"migProfile,omitempty"`
	MIGCount   int    `json:"migCount,omitempty"`
	// Share is a fraction of one GPU (above 0, below 1), time-sliced.
	Share float64 `json:"share,omitempty"`
	// GPUsPerNode spreads whole GPUs evenly, this many on each server.
	GPUsPerNode int `json:"gpusPerNode,omitempty"`
	// GPUModel is the one GPU model the job runs on (e.g. H100-80GB).
	GPUModel string `json:"gpuModel,omitempty"`
	// GPUModels lets the job run on any of several models, in order of
	// preference (a gang always lands on one model). Use it or GPUModel.
	GPUModels []string `json:"gpuModels,omitempty"`
	// Priority orders the job within its workspace (higher first, -1e6 to
	// 1e6, default 0); a higher-priority job may preempt a lower one of the
	// same workspace.
	Priority int `json:"priority"`
	// Preemptible jobs are requeued when preempted; others end Preempted.
	Preemptible bool `json:"preemptible"`
	// TimeLimitSeconds ends the allocation that long after the job was
	// placed (like Slurm's walltime); 0 means no limit.
	TimeLimitSeconds int64 `json:"timeLimitSeconds,omitempty"`
	// MinRuntimeSeconds protects a young job from preemption.
	MinRuntimeSeconds int64 `json:"minRuntimeSeconds,omitempty"`
	// ExpectedDurationSeconds is the user's estimate of the run time: it
	// tells waiting jobs when GPUs should free up and feeds simulations; it
	// ends nothing (TimeLimitSeconds does).
	ExpectedDurationSeconds int64 `json:"expectedDurationSeconds,omitempty"`
	// Topology constrains how tightly the gang is packed.
	Topology *TopologyRequirement `json:"topology,omitempty"`
	// MinDriver is the lowest NVIDIA driver version the job accepts
	// (e.g. "535.104"); servers with an older or unknown driver are skipped.
	MinDriver string `json:"minDriver,omitempty"`
	// Driver, when set, is the exact NVIDIA driver version the job needs
	// (e.g. a validated stack): only servers declaring it are used.
	Driver string `json:"driver,omitempty"`
	// ExternalID is a workload runtime's id of the job ("slurm:4242"): the
	// Slurm prolog finds the job by it. Unique among the tenant's live
	// jobs; another tenant's job may have the same id (ids are each
	// tenant's own) once every control-plane member applies rules 2
	// (GET /v1/cluster applyRules); before, unique across tenants.
	ExternalID string `json:"externalId,omitempty"`
	// CPUMilli and MemoryMiB are what the job needs of each server it runs
	// on besides GPUs (CPU in 1/1000 CPU); 0 asks for none. A job with
	// neither GPUs nor MIG slices nor a share is CPU-only and must ask for
	// CPU.
	CPUMilli  int64 `json:"cpuMilli,omitempty"`
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Pool names the server pool the job runs in (a Slurm partition's:
	// slurm:CLUSTER:PARTITION): it is placed only on the pool's servers,
	// as the pool is now. Empty: any server.
	Pool string `json:"pool,omitempty"`
}

// CPUOnly reports whether the job asks for no GPU at all (CPU and memory
// only).
func (s *JobSpec) CPUOnly() bool {
	return s.GPUs == 0 && s.MIGProfile == "" && s.MIGCount == 0 && s.Share == 0
}

// Models is the GPU models the job accepts, in order of preference; nil
// means any.
func (s *JobSpec) Models() []string {
	if len(s.GPUModels) > 0 {
		return s.GPUModels
	}
	if s.GPUModel != "" {
		return []string{s.GPUModel}
	}
	return nil
}

// CompareVersions compares dotted numeric versions ("535.183.01"): -1, 0
// or 1. ok is false when either is not such a version.
func CompareVersions(a, b string) (cmp int, ok bool) {
	pa, oka := versionParts(a)
	pb, okb := versionParts(b)
	if !oka || !okb {
		return 0, false
	}
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			if x < y {
				return -1, true
			}
			return 1, true
		}
	}
	return 0, true
}

func versionParts(v string) ([]int, bool) {
	if v == "" || len(v) > 32 {
		return nil, false
	}
	var out []int
	n, digits := 0, 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == '.' {
			if digits == 0 {
				return nil, false
			}
			out = append(out, n)
			n, digits = 0, 0
			continue
		}
		if v[i] < '0' || v[i] > '9' {
			return nil, false
		}
		n = n*10 + int(v[i]-'0')
		digits++
	}
	return out, true
}

// Topology levels a job may ask to be packed within, tightest first.
const (
	TopologyNVLinkDomain = "nvlink-domain"
	TopologyLeaf         = "leaf" // one leaf per rail: in a rail-optimized fabric, one stripe
	TopologyStripe       = "stripe"
	TopologyAny          = "any"
)

// TopologyRequirement: the gang must (Required) or should (preferred) be
// packed within one Level.
type TopologyRequirement struct {
	Level    string `json:"level" openapi:"required" enum:"TopologyNVLinkDomain,TopologyLeaf,TopologyStripe,TopologyAny"`
	Required bool   `json:"required"`
}

// MaxSeconds bounds durations given in seconds (a year).
const MaxSeconds = 366 * 24 * 3600

// UnitsPerGPU is the scheduler's capacity unit: 1/7000 of a GPU, so that a
// 1-slice MIG instance (1/7) and a 0.25 share are both whole numbers.
const UnitsPerGPU = 7000

// MIGSlice is one MIG GPU instance held by a job.
type MIGSlice struct {
	GPU     int    `json:"gpu"`
	Profile string `json:"profile"`
	Start   int    `json:"start"` // memory slot the instance starts at
}

// Placement is the GPUs of one server given to a job: whole GPUs, MIG
// slices of them, or a time-sliced share of one.
type Placement struct {
	Server string `json:"server"`
	// GPUs are the GPU indices used (whole, or hosting the job's slices or share).
	GPUs []int `json:"gpus"`
	// MIG lists the job's MIG instances; empty for whole GPUs.
	MIG []MIGSlice `json:"mig,omitempty"`
	// Share is the fraction of GPUs[0] a time-sliced job holds.
	Share float64 `json:"share,omitempty"`
	// NVLinkDomain and Leaves (the leaf each GPU's NIC is cabled to, in
	// GPUs order) say where on the topology the GPUs are.
	NVLinkDomain string   `json:"nvlinkDomain,omitempty"`
	Leaves       []string `json:"leaves,omitempty"`
}

// ShareUnits is a share in capacity units.
func ShareUnits(share float64) int { return int(math.Round(share * UnitsPerGPU)) }

// A field added to Job, to JobSpec or to a type a Job holds must be added
// to appendJobJSON in internal/state too (TestJobJSONAsMarshal fails until
// it is). Not in the doc comment below: the API's document is made from it.

// Job is a request for GPUs and what became of it.
type Job struct {
	// ID is the job's number, assigned at submit, never reused.
	ID uint64 `json:"id"`
	JobSpec
	State JobState `json:"state"`
	// Reason explains the state: why a job waits, why it ended.
	Reason *Reason `json:"reason,omitempty"`
	// Placement is where the job's GPUs are while it holds them.
	Placement   []Placement `json:"placement,omitempty"`
	SubmittedAt time.Time   `json:"submittedAt"`
	// SubmittedBy is who submitted the job (ROLE:TOKEN-ID).
	SubmittedBy string    `json:"submittedBy,omitempty"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// PlacedAt is when the job got its GPUs (time limits count from it).
	PlacedAt *time.Time `json:"placedAt,omitempty"`
	// NetworkRev is the fabric revision that carries the job's ports and
	// groups; the job is Ready once it is deployed on the job's leaves.
	NetworkRev uint64 `json:"networkRevision,omitempty"`
	// StartedAt is when its runtime reported it running.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// LastReport is when the leader last heard the job's runtime (kept in
	// the leader's memory, not replicated: filled in by the API server;
	// unset until the runtime reports to the current leader).
	LastReport *time.Time `json:"lastReport,omitempty"`
	// EndedAt is when the job reached its final state.
	EndedAt *time.Time `json:"endedAt,omitempty"`
	// StopDeadline is when a Preempting job's GPUs are released whether
	// or not its runtime reported it stopped.
	StopDeadline *time.Time `json:"stopDeadline,omitempty"`
	// PreemptedFor is the job a reclaim or priority preemption serves.
	PreemptedFor uint64 `json:"preemptedFor,omitempty"`
	// Requeues counts how often the job was preempted and queued again.
	Requeues int `json:"requeues,omitempty"`
	// BorrowNotBefore: after a reclaim the job may not borrow again before
	// this time (no admit-reclaim-admit thrash); its own guarantee it may use.
	BorrowNotBefore *time.Time `json:"borrowNotBefore,omitempty"`
	Message         string     `json:"message,omitempty"` // last runtime report
	// Warnings are what went wrong under the job without ending it (a GPU
	// that vanished, a server that went silent), newest last.
	Warnings []Reason `json:"warnings,omitempty"`
	// PathHealth is what telemetry last said of the job's path (its GPUs,
	// NICs, leaf ports and uplinks), as the leader committed it: set while
	// the job holds GPUs and the server scrapes telemetry.
	PathHealth *PathHealth `json:"pathHealth,omitempty"`
	// Runs are the job's holdings of GPUs, oldest first: one per
	// placement, closed when the GPUs are released (the job ends, or is
	// preempted and requeued). Usage accounting sums them. A job keeps at most MaxJobRuns runs:
	// at that many, the older half moves to the usage archive, where
	// reports still count them.
	Runs []Run `json:"runs,omitempty"`
	// RunsArchived counts the job's older runs moved to the usage archive
	// (a job requeued again and again); its runs number RunsArchived +
	// len(Runs).
	RunsArchived int `json:"runsArchived,omitempty"`
}

// MaxJobRuns is the most runs a job keeps (Job.Runs).
const MaxJobRuns = 32

// PathVerdict is the health of a job's path (internal/health decides it).
type PathVerdict string

// Path verdicts, from healthy to the worst fault. Unknown: no fresh data
// on some part of the path (no exporter covers it, or its target is stale).
const (
	PathHealthy    PathVerdict = "healthy"
	PathUnknown    PathVerdict = "unknown"
	PathCongested  PathVerdict = "congested"   // PFC pauses, ECN marks, CNPs above their thresholds
	PathLossy      PathVerdict = "lossy"       // drops and discards
	PathLinkErrors PathVerdict = "link_errors" // CRC, uncorrectable FEC, flaps, link down, optics out of range
	PathGPUErrors  PathVerdict = "gpu_errors"  // XID, NVLink, ECC errors, throttling
)

// PathVerdicts lists the verdicts by severity, least first.
var PathVerdicts = []PathVerdict{PathHealthy, PathUnknown, PathCongested, PathLossy, PathLinkErrors, PathGPUErrors}

// Severity orders verdicts: 0 for healthy, higher is worse, -1 if unknown
// to this build.
func (v PathVerdict) Severity() int { return slices.Index(PathVerdicts, v) }

// Faulty reports whether the verdict names a fault (not healthy, not
// unknown).
func (v PathVerdict) Faulty() bool { return v.Severity() > PathUnknown.Severity() }

// PathHealth is a job's committed path verdict and since when it holds.
type PathHealth struct {
	Verdict PathVerdict `json:"verdict" openapi:"required"`
	// Since is when the verdict was first seen (before the debounce).
	Since time.Time `json:"since" openapi:"required"`
	// Message names the worst signal and where ("leaf3/swp7 pfc_pause_rx
	// 12000/s >= 1000/s").
	Message string `json:"message,omitempty"`
}

// Run is one holding of GPUs by a job, from the commit of its placement to
// the release of its GPUs, as the replicated state recorded it.
type Run struct {
	// Start is when the job got the GPUs (the plan's commit time).
	Start time.Time `json:"start"`
	// End is when it released them; nil while it holds them.
	End *time.Time `json:"end,omitempty"`
	// GPUs counts the whole GPUs held (0 for MIG slices and shares).
	GPUs int `json:"gpus"`
	// Units is the capacity held in units of 1/7000 GPU (UnitsPerGPU):
	// whole GPUs, MIG slices by compute slices, shares by fraction.
	Units int `json:"units"`
	// BorrowedUnits is the part of Units above the workspace's guarantee
	// when the job was placed: what the workspace already held, plus
	// Units, beyond Guaranteed. The rest of Units is guaranteed use.
	BorrowedUnits int `json:"borrowedUnits,omitempty"`
}

// ValidateJobSpec checks a job request's fields (not its relations to state).
func ValidateJobSpec(s *JobSpec) *Error {
	if s.Name != "" {
		if err := ValidateName("name", s.Name); err != nil {
			return err
		}
	}
	if err := ValidateName("tenant", s.Tenant); err != nil {
		return err
	}
	if err := ValidateName("workspace", s.Workspace); err != nil {
		return err
	}
	kinds := 0
	for _, set := range []bool{s.GPUs != 0, s.MIGProfile != "" || s.MIGCount != 0, s.Share != 0} {
		if set {
			kinds++
		}
	}
	if err := ValidateRange("cpuMilli", s.CPUMilli, 0, MaxCPUMilli); err != nil {
		return err
	}
	if err := ValidateRange("memoryMiB", s.MemoryMiB, 0, MaxMemoryMiB); err != nil {
		return err
	}
	if kinds == 0 && s.CPUMilli > 0 {
		if s.GPUsPerNode != 0 {
			return Invalid("gpusPerNode", "a CPU-only job runs on one server: gpusPerNode does not apply")
		}
	} else if kinds != 1 {
		return Invalid("gpus", "ask for exactly one of gpus (whole GPUs), migProfile with migCount (MIG slices), or share (a fraction of one GPU); a CPU-only job asks for none of them and for cpuMilli")
	}
	switch {
	case kinds == 0:
	case s.GPUs != 0:
		if err := ValidateRange("gpus", int64(s.GPUs), 1, MaxGPUs); err != nil {
			return err
		}
	case s.Share != 0:
		if !(s.Share > 0 && s.Share < 1) {
			return Invalid("share", "share %g must be a fraction of one GPU, above 0 and below 1", s.Share)
		}
		if u := s.Share * UnitsPerGPU; u != float64(int(u)) || int(u) < 7 {
			return Invalid("share", "share %g must be a multiple of 0.001 GPU", s.Share)
		}
		if s.GPUsPerNode != 0 {
			return Invalid("gpusPerNode", "a share runs on one GPU: gpusPerNode does not apply")
		}
	default:
		if s.MIGProfile == "" {
			return Invalid("migProfile", "migCount needs a migProfile such as 3g.40gb")
		}
		if len(s.MIGProfile) > 32 {
			return Invalid("migProfile", "migProfile is %d characters; the limit is 32", len(s.MIGProfile))
		}
		if err := ValidateRange("migCount", int64(s.MIGCount), 1, 56); err != nil {
			return err
		}
		if s.GPUsPerNode != 0 {
			return Invalid("gpusPerNode", "MIG slices of a job are placed on one server: gpusPerNode does not apply")
		}
	}
	if s.GPUsPerNode != 0 {
		if err := ValidateRange("gpusPerNode", int64(s.GPUsPerNode), 1, 1024); err != nil {
			return err
		}
		if s.GPUs%s.GPUsPerNode != 0 {
			return Invalid("gpusPerNode", "gpus %d is not a multiple of gpusPerNode %d", s.GPUs, s.GPUsPerNode)
		}
	}
	if s.GPUModel != "" {
		if _, ok := LookupGPUModel(s.GPUModel); !ok {
			return Invalid("gpuModel", "gpuModel %q is unknown; known models: %v", s.GPUModel, GPUModelNames())
		}
		if len(s.GPUModels) > 0 {
			return Invalid("gpuModels", "give gpuModel or gpuModels, not both")
		}
	}
	if len(s.GPUModels) > MaxModels {
		return Invalid("gpuModels", "%d GPU models; the limit is %d", len(s.GPUModels), MaxModels)
	}
	for i, m := range s.GPUModels {
		f := fmt.Sprintf("gpuModels[%d]", i)
		if _, ok := LookupGPUModel(m); !ok {
			return Invalid(f, "GPU model %q is unknown; known models: %v", m, GPUModelNames())
		}
		if slices.Index(s.GPUModels, m) != i {
			return Invalid(f, "GPU model %s is listed twice", m)
		}
	}
	if s.Driver != "" {
		if _, ok := versionParts(s.Driver); !ok {
			return Invalid("driver", "driver %q is not a dotted numeric version such as 535.183.01", s.Driver)
		}
		if s.MinDriver != "" {
			if cmp, _ := CompareVersions(s.Driver, s.MinDriver); cmp < 0 {
				return Invalid("driver", "driver %s is older than minDriver %s", s.Driver, s.MinDriver)
			}
		}
	}
	if s.MinDriver != "" {
		if _, ok := versionParts(s.MinDriver); !ok {
			return Invalid("minDriver", "minDriver %q is not a dotted numeric version such as 535.104", s.MinDriver)
		}
	}
	if t := s.Topology; t != nil {
		switch t.Level {
		case TopologyNVLinkDomain, TopologyLeaf, TopologyStripe, TopologyAny:
		default:
			return Invalid("topology.level", "topology level %q is not one of nvlink-domain, leaf, stripe, any", t.Level)
		}
	}
	if err := ValidateRange("timeLimitSeconds", s.TimeLimitSeconds, 0, MaxSeconds); err != nil {
		return err
	}
	if err := ValidateRange("minRuntimeSeconds", s.MinRuntimeSeconds, 0, MaxSeconds); err != nil {
		return err
	}
	if err := ValidateRange("expectedDurationSeconds", s.ExpectedDurationSeconds, 0, MaxSeconds); err != nil {
		return err
	}
	if s.TimeLimitSeconds > 0 && s.ExpectedDurationSeconds > s.TimeLimitSeconds {
		return Invalid("expectedDurationSeconds", "expectedDurationSeconds %d exceeds timeLimitSeconds %d: the allocation would end first", s.ExpectedDurationSeconds, s.TimeLimitSeconds)
	}
	if s.Pool != "" {
		if err := ValidatePoolName("pool", s.Pool); err != nil {
			return err
		}
	}
	if s.ExternalID != "" {
		if err := ValidateExternalID("externalId", s.ExternalID); err != nil {
			return err
		}
	}
	return ValidateRange("priority", int64(s.Priority), -MaxPriority, MaxPriority)
}

// UsageRecord is what accounting keeps of a job that retention removed
// from the state (internal/state retain.go): who ran it and its runs, to
// the second, without its spec, placements or messages. Usage reports
// (internal/usage) read it as they read the job's own runs.
type UsageRecord struct {
	Job         uint64 `json:"job"`
	Name        string `json:"name,omitempty"`
	Tenant      string `json:"tenant"`
	Workspace   string `json:"workspace"`
	SubmittedBy string `json:"submittedBy,omitempty"`
	// EndedAt is when the job ended, to the second: the archive is
	// ordered by it, and dropped by it past its own retention.
	EndedAt time.Time `json:"endedAt"`
	// Runs are the job's runs with their times truncated to the second
	// (what usage counts), every one closed.
	Runs []Run `json:"runs"`
	// Split: the job's runs are in more than one place (records of its
	// older runs, taken while it was live, and the job or its last
	// record); reports count the job once.
	Split bool `json:"split,omitempty"`
}

// A UsageRecord is encoded as an array, its times in Unix seconds and a
// default name (job-ID) left out: the archive holds a record per removed
// job for months, and this is under half the bytes of an object with
// RFC 3339 times.
//
//	[job, name, tenant, workspace, submittedBy, endedAt, [start, end, gpus, units, borrowed, ...]]
//
// with a trailing 1 when Split.
func (u UsageRecord) MarshalJSON() ([]byte, error) {
	name := u.Name
	if name == DefaultJobName(u.Job) {
		name = ""
	}
	runs := make([]int64, 0, 5*len(u.Runs))
	for _, r := range u.Runs {
		end := u.EndedAt
		if r.End != nil {
			end = *r.End
		}
		runs = append(runs, r.Start.Unix(), end.Unix(), int64(r.GPUs), int64(r.Units), int64(r.BorrowedUnits))
	}
	rec := []any{u.Job, name, u.Tenant, u.Workspace, u.SubmittedBy, u.EndedAt.Unix(), runs}
	if u.Split {
		rec = append(rec, 1)
	}
	return json.Marshal(rec)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (u *UsageRecord) UnmarshalJSON(b []byte) error {
	var ended int64
	var runs []int64
	split := 0
	if err := json.Unmarshal(b, &[]any{&u.Job, &u.Name, &u.Tenant, &u.Workspace, &u.SubmittedBy, &ended, &runs, &split}); err != nil {
		return fmt.Errorf("usage record: %w", err)
	}
	u.Split = split == 1
	if len(runs)%5 != 0 {
		return fmt.Errorf("usage record of job %d: %d run fields, not groups of 5", u.Job, len(runs))
	}
	if u.Name == "" {
		u.Name = DefaultJobName(u.Job)
	}
	u.EndedAt = time.Unix(ended, 0).UTC()
	u.Runs = make([]Run, 0, len(runs)/5)
	for i := 0; i < len(runs); i += 5 {
		end := time.Unix(runs[i+1], 0).UTC()
		u.Runs = append(u.Runs, Run{Start: time.Unix(runs[i], 0).UTC(), End: &end, GPUs: int(runs[i+2]), Units: int(runs[i+3]), BorrowedUnits: int(runs[i+4])})
	}
	return nil
}

// DefaultJobName is the name a job submitted without one gets (job-ID).
func DefaultJobName(id uint64) string { return "job-" + strconv.FormatUint(id, 10) }
