package usage

import (
	"cmp"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topk"
)

// Source is what usage reads of the state: the jobs that may have held
// GPUs in a period. state.View satisfies it.
type Source interface {
	// LiveJobs are the non-terminal jobs (a requeued job's past runs too).
	LiveJobs() iter.Seq[*domain.Job]
	// EndedSince are the terminal jobs that ended after since.
	EndedSince(since time.Time) iter.Seq[*domain.Job]
	// ArchivedSince are the usage records of jobs retention removed from
	// the state that ended after since: their runs count as the jobs' own
	// did, so a report is the same before and after retention.
	ArchivedSince(since time.Time) iter.Seq[*domain.UsageRecord]
}

// scopedSource is a Source that lists a tenant's (or a workspace's) live
// jobs apart, and the live jobs that ran (state.View): a report then
// reads those, not every live job, under the state's read lock (issue
// 18). A job that never held GPUs counts nothing.
type scopedSource interface {
	LiveJobsOf(tenant, workspace string) iter.Seq[*domain.Job]
	LiveJobsRan() iter.Seq[*domain.Job]
}

// By is what the figures are grouped by.
type By string

const (
	ByTenant    By = "tenant"
	ByWorkspace By = "workspace"
	ByJob       By = "job"
	// ByToken groups by the submitting token (Job.SubmittedBy) within each
	// tenant: an admin token that submitted into two tenants is two rows.
	ByToken By = "token"
)

// Bys lists the groupings, in the order help texts name them.
var Bys = []By{ByTenant, ByWorkspace, ByJob, ByToken}

// ParseBy reads a grouping; "" is ByTenant.
func ParseBy(s string) (By, error) {
	if s == "" {
		return ByTenant, nil
	}
	if b := By(strings.ToLower(s)); slices.Contains(Bys, b) {
		return b, nil
	}
	return "", domain.Invalid("by", "by %q is not one of tenant, workspace, job, token", s)
}

// Query is what to count: jobs of Tenant (and Workspace) or of every
// tenant when empty, over [Since, Until). A run still holding its GPUs
// counts up to Now when Now is before Until. Times count to the second
// (truncated), as the figures do.
type Query struct {
	Tenant, Workspace string
	Since, Until, Now time.Time
	By                By
	// After and Limit page the rows (the API's pages): only the rows
	// after After (nil: from the first), at most Limit of them (0: all).
	// The total is the whole report's. By job a page keeps Limit rows as
	// it goes, not a row per job (issue 18: 100,000 rows, 54 MB, under
	// the state's read lock).
	After *Key
	Limit int
}

// Figures are the sums of one group, exact: whole GPUs and capacity units
// (domain.UnitsPerGPU to a GPU) times seconds held within the period.
type Figures struct {
	// GPUSeconds counts whole GPUs only: MIG slices and shares add none.
	GPUSeconds int64 `json:"gpuSeconds"`
	// UnitSeconds counts every holding by its capacity: a whole GPU is
	// 7000 units, a MIG slice its compute slices x 1000, a share its
	// fraction of 7000.
	UnitSeconds int64 `json:"unitSeconds"`
	// BorrowedUnitSeconds is the part of UnitSeconds held above the
	// workspace's guarantee (decided when each run was placed).
	BorrowedUnitSeconds int64 `json:"borrowedUnitSeconds"`
	// Jobs counts the jobs that held GPUs in the period.
	Jobs int `json:"jobs"`
}

const secondsPerHour = 3600

// GPUHours is the whole-GPU hours.
func (f Figures) GPUHours() float64 { return float64(f.GPUSeconds) / secondsPerHour }

// GPUEquivalentHours is the hours of every holding in GPU-equivalents.
func (f Figures) GPUEquivalentHours() float64 { return unitHours(f.UnitSeconds) }

// BorrowedHours is the GPU-equivalent hours above the guarantee.
func (f Figures) BorrowedHours() float64 { return unitHours(f.BorrowedUnitSeconds) }

// GuaranteedHours is the GPU-equivalent hours within the guarantee.
func (f Figures) GuaranteedHours() float64 { return unitHours(f.UnitSeconds - f.BorrowedUnitSeconds) }

func unitHours(us int64) float64 { return float64(us) / (domain.UnitsPerGPU * secondsPerHour) }

func (f *Figures) add(o Figures) {
	f.GPUSeconds += o.GPUSeconds
	f.UnitSeconds += o.UnitSeconds
	f.BorrowedUnitSeconds += o.BorrowedUnitSeconds
	f.Jobs += o.Jobs
}

// Key names a group; the fields the grouping does not use are empty.
type Key struct {
	Tenant    string
	Workspace string // ByWorkspace, ByJob
	Job       uint64 // ByJob
	JobName   string // ByJob
	Token     string // ByToken, ByJob: the submitting token (ROLE:ID)
}

// Row is one group's figures.
type Row struct {
	Key
	Figures
}

// Report is the answer to a Query.
type Report struct {
	// Since and Until are the period counted, to the second.
	Since, Until time.Time
	By           By
	// Rows are the groups that held GPUs in the period, by tenant,
	// workspace, job, token.
	Rows []Row
	// Total sums the rows; Total.Jobs counts each job once.
	Total Figures
	// More says a Query.Limit left rows out.
	More bool
}

// Compute sums the runs of the jobs q selects, clipped to its period.
func Compute(src Source, q Query) (*Report, error) {
	by, err := ParseBy(string(q.By))
	if err != nil {
		return nil, err
	}
	if q.Workspace != "" && q.Tenant == "" {
		return nil, domain.Invalid("tenant", "a workspace filter needs its tenant")
	}
	since, until, now := trunc(q.Since), trunc(q.Until), trunc(q.Now)
	if !until.After(since) {
		return nil, domain.Invalid("until", "until %s is not after since %s: the period is empty",
			until.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	}
	// Open runs count up to now, but never past the period.
	openEnd := earliest(until, now)
	rep := &Report{Since: since, Until: until, By: by, Rows: []Row{}}
	// Rows by key; by job every job is its own row (a job is yielded
	// once: live and ended jobs are apart), so no lookup is needed.
	index := map[Key]int{}
	// A split job (its older runs archived while it was live) comes in
	// parts: it is counted once in the total and in its row (a job's
	// parts share its key).
	var splitSeen map[uint64]bool
	// By job with a limit, the rows of jobs in one part go to a page that
	// keeps the Limit first; a split job's parts are summed in Rows first.
	var page *topk.Keeper[Row]
	if by == ByJob && q.Limit > 0 {
		page = topk.New(q.Limit, compareRows)
	}
	count := func(k Key, runs []domain.Run, split bool) {
		if q.Tenant != "" && k.Tenant != q.Tenant || q.Workspace != "" && k.Workspace != q.Workspace {
			return
		}
		f := runFigures(runs, since, until, openEnd)
		if f.Jobs == 0 {
			return
		}
		if split {
			if splitSeen == nil {
				splitSeen = map[uint64]bool{}
			}
			if splitSeen[k.Job] {
				f.Jobs = 0
			}
			splitSeen[k.Job] = true
		}
		rep.Total.add(f)
		k = keyBy(k, by)
		if q.After != nil && Compare(&k, q.After) <= 0 {
			return
		}
		if by == ByJob && !split {
			if page != nil {
				page.Push(Row{Key: k, Figures: f})
				return
			}
			rep.Rows = append(rep.Rows, Row{Key: k, Figures: f})
			return
		}
		i, ok := index[k]
		if !ok {
			i = len(rep.Rows)
			index[k] = i
			rep.Rows = append(rep.Rows, Row{Key: k})
		}
		rep.Rows[i].add(f)
	}
	live := src.LiveJobs()
	if s, ok := src.(scopedSource); ok {
		live = s.LiveJobsRan()
		if q.Tenant != "" {
			live = s.LiveJobsOf(q.Tenant, q.Workspace)
		}
	}
	for j := range live {
		count(jobKey(j), j.Runs, j.RunsArchived > 0)
	}
	for j := range src.EndedSince(since) {
		count(jobKey(j), j.Runs, j.RunsArchived > 0)
	}
	// A removed job is in the archive only: it is counted once (a split
	// one once over its records).
	for u := range src.ArchivedSince(since) {
		count(Key{Tenant: u.Tenant, Workspace: u.Workspace, Job: u.Job, JobName: u.Name, Token: u.SubmittedBy}, u.Runs, u.Split)
	}
	if q.Limit > 0 {
		if page != nil {
			kept, more := page.Sorted()
			rep.Rows, rep.More = append(rep.Rows, kept...), more
		}
		rows, more := topk.Smallest(rep.Rows, q.Limit, compareRows)
		rep.Rows, rep.More = rows, rep.More || more
		return rep, nil
	}
	rep.Rows = sorted(rep.Rows)
	return rep, nil
}

func compareRows(a, b Row) int { return Compare(&a.Key, &b.Key) }

// Compare orders keys as a report's rows are: by tenant, workspace, job,
// token. Rows of one grouping have keys that differ.
func Compare(a, b *Key) int {
	if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
		return c
	}
	if c := strings.Compare(a.Workspace, b.Workspace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Job, b.Job); c != 0 {
		return c
	}
	return strings.Compare(a.Token, b.Token)
}

// sorted orders rows by tenant, workspace, job, token. It sorts indices and
// then moves each row once: by job there is a row per job, and moving the
// rows themselves was most of a report's time.
func sorted(rows []Row) []Row {
	ix := make([]int32, len(rows))
	for i := range ix {
		ix[i] = int32(i)
	}
	slices.SortFunc(ix, func(i, j int32) int { return Compare(&rows[i].Key, &rows[j].Key) })
	out := make([]Row, len(rows))
	for i, k := range ix {
		out[i] = rows[k]
	}
	return out
}

// runFigures sums a job's runs within [since, until); a run still open ends at
// openEnd. Jobs is 1 when any run held GPUs for a second of the period.
// Times are Unix seconds, the second a time falls in (what trunc gives), at
// a fraction of Truncate's cost.
func runFigures(runs []domain.Run, since, until, openEnd time.Time) Figures {
	var f Figures
	lo, hi, open := since.Unix(), until.Unix(), openEnd.Unix()
	for _, r := range runs {
		s, e := max(r.Start.Unix(), lo), open
		if r.End != nil {
			e = min(r.End.Unix(), hi)
		}
		if e <= s {
			continue
		}
		secs := e - s
		f.GPUSeconds += int64(r.GPUs) * secs
		f.UnitSeconds += int64(r.Units) * secs
		f.BorrowedUnitSeconds += int64(r.BorrowedUnits) * secs
		f.Jobs = 1
	}
	return f
}

// jobKey is every field of j's key; keyBy keeps those by uses.
func jobKey(j *domain.Job) Key {
	return Key{Tenant: j.Tenant, Workspace: j.Workspace, Job: j.ID, JobName: j.Name, Token: j.SubmittedBy}
}

func keyBy(k Key, by By) Key {
	switch by {
	case ByWorkspace:
		return Key{Tenant: k.Tenant, Workspace: k.Workspace}
	case ByJob:
		return k
	case ByToken:
		return Key{Tenant: k.Tenant, Token: k.Token}
	}
	return Key{Tenant: k.Tenant}
}

func trunc(t time.Time) time.Time { return t.Truncate(time.Second) }

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ParseTime reads a point in time for field: an RFC 3339 time, or a
// duration back from now: Go's (12h, 90m) or in days (30d, 1d12h).
func ParseTime(field, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, ok := parseAgo(s)
	if !ok {
		return time.Time{}, domain.Invalid(field, "%s %q is neither a duration back from now (30d, 12h, 90m, 1d12h) nor an RFC 3339 time", field, s)
	}
	return now.Add(-d), nil
}

// maxAgo bounds a duration back from now (ten years): far enough for any
// report, short of time.Duration's overflow.
const maxAgo = 10 * 366 * 24 * time.Hour

// parseAgo reads a non-negative duration with an optional leading number
// of days.
func parseAgo(s string) (time.Duration, bool) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, false
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, days <= maxAgo
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || s[0] == '+' {
		return 0, false
	}
	d += days
	return d, d <= maxAgo
}
