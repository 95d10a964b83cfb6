package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestJobJSONAsMarshal fills every exported field of domain.Job, and of
// the types it holds, through reflection with random values (pointers nil
// or set, lists nil, empty or not, strings with escapes and invalid UTF-8,
// numbers zero or not, times of any year and zone or zero) and compares
// appendJobJSON with json.Marshal byte for byte; appendJobJSON refuses
// exactly what json.Marshal refuses. A field added to Job or to a type it
// holds is set here without anyone's help, so the test fails until
// appendJobJSON writes it.
func TestJobJSONAsMarshal(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	fill := jobFiller{r: rand.New(rand.NewPCG(18, 1))}
	jobs := []*domain.Job{{}, benchPendingJob(7), benchRunningJob(8)}
	for range n {
		var j domain.Job
		fill.value(reflect.ValueOf(&j).Elem(), "Job")
		jobs = append(jobs, &j)
	}
	refused := 0
	for i, j := range jobs {
		if !jobJSONAsMarshal(t, j) {
			refused++
		}
		if t.Failed() {
			t.Fatalf("job %d of %d", i, len(jobs))
		}
	}
	t.Logf("%d of %d jobs refused by json.Marshal and appendJobJSON", refused, len(jobs))
	// Both ways are exercised: most jobs written, some refused.
	if refused == 0 || refused > len(jobs)/2 {
		t.Fatalf("%d of %d jobs refused by json.Marshal: the filler's odd values are too rare or too common", refused, len(jobs))
	}
	for f, seen := range fill.fields {
		if !seen {
			t.Errorf("field %s never set", f)
		}
	}
}

// jobJSONAsMarshal checks appendJobJSON against json.Marshal for j (onto a
// buffer that holds something already) and says whether j was written.
func jobJSONAsMarshal(t *testing.T, j *domain.Job) bool {
	t.Helper()
	want, err := json.Marshal(j)
	got, ok := appendJobJSON([]byte("prefix"), j)
	switch {
	case err != nil && ok:
		t.Errorf("json.Marshal refuses %+v (%v), appendJobJSON wrote %s", j, err, got)
	case err == nil && !ok:
		t.Errorf("appendJobJSON refused %s", want)
	case err == nil && !bytes.Equal(got[len("prefix"):], want):
		t.Errorf("appendJobJSON:\n%s\njson.Marshal:\n%s", got[len("prefix"):], want)
	case err == nil && !bytes.HasPrefix(got, []byte("prefix")):
		t.Errorf("appendJobJSON changed the bytes it appends to: %q", got)
	}
	return err == nil
}

// jobFiller sets values at random through reflection, and records which
// struct fields it met and set non-zero (fields: "Type.Field").
type jobFiller struct {
	r      *rand.Rand
	fields map[string]bool
}

var timeType = reflect.TypeFor[time.Time]()

// fillStrings are strings json.Marshal writes in every way it can: plain,
// escaped, HTML, line separators, invalid UTF-8, multibyte runes.
var fillStrings = []string{
	"", "acme", "job-1", "H100-80GB", "capacity", "waiting for 1 GPU", "admin:test",
	`quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "line\u2028sep\u2029para", "bad \xff\xfe utf8 \xc3", "\xe2\x80",
	"héllo wörld ☃ 𝄞", "\ufffd", "end\\", "slurm:4242",
}

func (f *jobFiller) str() string {
	if f.r.IntN(3) == 0 {
		b := make([]byte, f.r.IntN(12))
		for i := range b {
			b[i] = byte(f.r.IntN(256))
		}
		return string(b)
	}
	return fillStrings[f.r.IntN(len(fillStrings))]
}

// time is zero now and then (in UTC or a zone), else any instant of a wide range (years
// before 0 and after 9999 too), to the second or nanosecond, in UTC,
// Local or a fixed zone (of seconds, or of 24 hours and more, now and
// then).
func (f *jobFiller) time() time.Time {
	if f.r.IntN(8) == 0 {
		if f.r.IntN(2) == 0 { // the zero instant in a zone: IsZero, yet not time.Time{}
			return time.Time{}.In(time.FixedZone("west", -3600*(1+f.r.IntN(12))))
		}
		return time.Time{}
	}
	var sec int64
	switch f.r.IntN(100) { // a year json.Marshal refuses rarely: a job has ~20 times
	case 0:
		sec = f.r.Int64N(1<<40) - 1<<39 // ±17,000 years around 1970
	case 1:
		sec = -62135596800 + f.r.Int64N(3600*24*2) - 3600*24 // near year 0
	case 2:
		sec = 253402300799 + f.r.Int64N(3600*24*2) - 3600*24 // near year 9999's end
	default:
		sec = 1_700_000_000 + f.r.Int64N(1<<30)
	}
	var nsec int64
	if f.r.IntN(2) == 0 {
		nsec = f.r.Int64N(1e9)
		if f.r.IntN(3) == 0 {
			nsec = nsec / 1e6 * 1e6
		}
	}
	t := time.Unix(sec, nsec)
	switch f.r.IntN(6) {
	case 0:
		if f.r.IntN(20) == 0 {
			return t.In(time.FixedZone("far", (24+f.r.IntN(3))*3600*(1-2*f.r.IntN(2))))
		}
		return t.Local()
	case 1:
		off := f.r.IntN(2*24*3600) - 24*3600
		if f.r.IntN(2) == 0 {
			off = off / 900 * 900
		}
		return t.In(time.FixedZone(fmt.Sprintf("Z%d", off), off))
	default:
		return t.UTC()
	}
}

func (f *jobFiller) float() float64 {
	switch f.r.IntN(12) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		if f.r.IntN(10) == 0 {
			return []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[f.r.IntN(3)]
		}
		return 1
	case 3:
		return []float64{1e-6, 1e-7, 9.99e-7, 1e21, 1e20, 123456789e-15, -5e-324, math.MaxFloat64}[f.r.IntN(8)]
	case 4:
		return math.Float64frombits(f.r.Uint64())
	case 5:
		return float64(f.r.IntN(7000)) / 7000
	default:
		return (f.r.Float64() - 0.5) * math.Pow(10, float64(f.r.IntN(50)-25))
	}
}

func (f *jobFiller) int(bits int) int64 {
	switch f.r.IntN(5) {
	case 0:
		return 0
	case 1:
		return -1 << (bits - 1) // the least
	case 2:
		return 1<<(bits-1) - 1
	default:
		return f.r.Int64N(2001) - 1000
	}
}

// value sets v (settable) at random; where names the struct field it is.
func (f *jobFiller) value(v reflect.Value, where string) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(f.time()))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if f.fields == nil {
			f.fields = map[string]bool{}
		}
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			name := v.Type().Name() + "." + sf.Name
			f.fields[name] = f.fields[name] || false
			f.value(v.Field(i), name)
			if !v.Field(i).IsZero() {
				f.fields[name] = true
			}
		}
	case reflect.Pointer:
		if f.r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		f.value(p.Elem(), where)
		v.Set(p)
	case reflect.Slice:
		switch k := f.r.IntN(5); k {
		case 0:
			v.SetZero()
		default:
			s := reflect.MakeSlice(v.Type(), k-1, k-1) // empty, not nil, for k 1
			for i := range s.Len() {
				f.value(s.Index(i), where)
			}
			v.Set(s)
		}
	case reflect.Map:
		if f.r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMap(v.Type())
		for range f.r.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.value(k, where)
			f.value(e, where)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.int(v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := uint64(f.int(v.Type().Bits()))
		if v.OverflowUint(n) {
			n = uint64(f.r.IntN(1000))
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(f.float())
	default:
		// A kind this filler does not set (an interface, a channel...):
		// a field of it would go unchecked.
		panic(fmt.Sprintf("jobFiller: %s is a %s", where, v.Kind()))
	}
}

// FuzzJobJSON: a job filled from a seed, its strings, share, times and
// first placement's GPU count set from the fuzzer's values, written by
// appendJobJSON and by json.Marshal.
func FuzzJobJSON(f *testing.F) {
	f.Add(uint64(1), "acme", 0.25, int64(1_700_000_000), int64(0), 0)
	f.Add(uint64(2), "<&>\u2028\xff", 1e-7, int64(-62135596801), int64(999_999_999), 3600*24)
	f.Add(uint64(3), "", math.Inf(1), int64(253402300800), int64(1), -3600)
	for i, s := range fillStrings {
		f.Add(uint64(100+i), s, float64(i)/7, int64(i)*1e9, int64(i), i*900)
	}
	f.Fuzz(func(t *testing.T, seed uint64, s string, share float64, sec, nsec int64, off int) {
		fill := jobFiller{r: rand.New(rand.NewPCG(seed, 2))}
		var j domain.Job
		fill.value(reflect.ValueOf(&j).Elem(), "Job")
		at := time.Unix(sec, nsec).In(time.FixedZone("fuzz", off))
		j.Name, j.Message, j.Tenant = s, s, s
		j.Share = share
		j.SubmittedAt = at
		j.Warnings = append(j.Warnings, domain.Reason{Code: s, Message: s, Reservation: &domain.Reservation{Start: at, Basis: []string{s}}})
		j.Placement = append(j.Placement, domain.Placement{Server: s, Share: share, Leaves: []string{s}})
		jobJSONAsMarshal(t, &j)
	})
}

// benchPendingJob is a job as BenchmarkRaftSnapshotPersist's are: a
// submit of MakeJob given a pending reason by a plan.
func benchPendingJob(id uint64) *domain.Job {
	at := time.Date(2026, 11, 28, 3, 52, 38, 123456789, time.UTC)
	return &domain.Job{
		ID:          id,
		JobSpec:     MakeJob("research", 1).Obj().Spec,
		State:       domain.JobPending,
		Reason:      &domain.Reason{Code: "capacity", Message: "waiting for 1 GPU"},
		SubmittedAt: at, SubmittedBy: "admin:test", UpdatedAt: at.Add(time.Second),
	}
}

// benchRunningJob is a running gang of 16 GPUs on two servers, requeued
// once: two runs, one closed.
func benchRunningJob(id uint64) *domain.Job {
	j := benchPendingJob(id)
	j.GPUs, j.GPUsPerNode, j.GPUModel, j.Preemptible, j.TimeLimitSeconds = 16, 8, "H100-80GB", true, 7200
	j.Name = domain.DefaultJobName(id)
	j.State = domain.JobRunning
	j.Reason = &domain.Reason{Code: "running", Message: "reported running by slurm"}
	placed, started, ended := j.SubmittedAt.Add(time.Minute), j.SubmittedAt.Add(75*time.Second), j.SubmittedAt.Add(50*time.Second)
	for s := range 2 {
		p := domain.Placement{Server: fmt.Sprintf("s%d-%d", s, id%32), NVLinkDomain: fmt.Sprintf("nvl%d", s)}
		for g := range 8 {
			p.GPUs = append(p.GPUs, g)
			p.Leaves = append(p.Leaves, fmt.Sprintf("leaf%d-%d", s, g))
		}
		j.Placement = append(j.Placement, p)
	}
	j.PlacedAt, j.StartedAt, j.NetworkRev, j.Requeues = &placed, &started, 412, 1
	j.Runs = []domain.Run{
		{Start: j.SubmittedAt.Add(10 * time.Second), End: &ended, GPUs: 16, Units: 16 * domain.UnitsPerGPU, BorrowedUnits: 8 * domain.UnitsPerGPU},
		{Start: placed, GPUs: 16, Units: 16 * domain.UnitsPerGPU},
	}
	return j
}

// BenchmarkJobJSON is one job's JSON, json.Marshal's and appendJobJSON's
// (its bytes copied out, as Persist keeps them).
func BenchmarkJobJSON(b *testing.B) {
	for _, c := range []struct {
		name string
		job  *domain.Job
	}{{"pending", benchPendingJob(120_001)}, {"running", benchRunningJob(120_002)}} {
		b.Run(c.name+"/marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(c.job); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var ok bool
				if buf, ok = appendJobJSON(buf[:0], c.job); !ok {
					b.Fatal("refused")
				}
				_ = bytes.Clone(buf)
			}
		})
	}
}

// TestSnapshotJobsAsMarshal: a snapshot writes its jobs' JSON as
// json.Marshal of the map by ID does, and a job json.Marshal refuses (a
// time of the year 10000) fails the snapshot with encoding/json's reason
// and the job's ID, as before appendJobJSON.
func TestSnapshotJobsAsMarshal(t *testing.T) {
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := benchPendingJob(9)
	refused.UpdatedAt = far
	cases := map[string]struct {
		jobs    []*domain.Job
		wantErr string
	}{
		"written":  {jobs: []*domain.Job{benchPendingJob(3), benchRunningJob(4), {ID: 5}}},
		"refused":  {jobs: []*domain.Job{benchPendingJob(3), refused}, wantErr: "encode job 9: json: error calling MarshalJSON for type time.Time: Time.MarshalJSON: year outside of range [0,9999]"},
		"no jobs":  {jobs: nil},
		"html ids": {jobs: []*domain.Job{{ID: 1 << 40, JobSpec: domain.JobSpec{Name: "<a&b>", Share: 1e-7}}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := &snapshot{head: []byte("{}"), jobs: map[uint64]*snapJob{}}
			byID := map[string]*domain.Job{}
			for _, j := range c.jobs {
				s.jobs[j.ID] = &snapJob{job: j}
				byID[fmt.Sprint(j.ID)] = j
			}
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			err := s.write(w)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w.Flush()
			var got struct{ Jobs json.RawMessage }
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, buf.Bytes())
			}
			want, err := json.Marshal(byID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Jobs, want) {
				t.Fatalf("jobs:\n%s\nwant\n%s", got.Jobs, want)
			}
		})
	}
}

// TestSnapshotKeepsEncodedJobs: a Persist hands the JSON it encoded back
// to the FSM, so the next encodes only the jobs changed since; a job
// changed while the Persist ran keeps its newer copy. Commands go straight
// to the FSM: the harness's apply persists a snapshot of its own first.
func TestSnapshotKeepsEncodedJobs(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 16)
	apply := h.benchApply(t)
	for range 5 {
		apply(CmdJobSubmit, MakeJob("research", 1).Obj())
	}
	snapshotBytes(t, must(h.f.Snapshot()))
	before := maps.Clone(h.f.snapJobs.byID)
	for id, e := range before {
		if e.enc == nil || e.job != nil {
			t.Fatalf("job %d not kept encoded after a Persist: %+v", id, e)
		}
	}
	apply(CmdJobSubmit, MakeJob("research", 1).Obj()) // job 6
	apply(CmdJobCancel, JobCancel{ID: 2})
	s := must(h.f.Snapshot())
	apply(CmdJobCancel, JobCancel{ID: 6}) // while the Persist runs
	got := snapshotBytes(t, s)
	if !bytes.Contains(got, []byte(`"2":{"id":2,`)) || !bytes.Contains(got, []byte(`"6":{"id":6,`)) {
		t.Fatalf("snapshot lacks jobs 2 and 6: %s", got)
	}
	after := h.f.snapJobs.byID
	for id := range uint64(7) {
		e := after[id]
		switch id {
		case 0:
			if e != nil {
				t.Fatalf("job 0: %+v", e)
			}
		case 2:
			if e.enc == nil || !bytes.Contains(e.enc, []byte(`"state":"Cancelled"`)) {
				t.Fatalf("job 2, cancelled before the snapshot, not kept encoded as it is: %+v", e)
			}
		case 6:
			if e.job == nil || e.job.State != domain.JobCancelled {
				t.Fatalf("job 6, cancelled during the Persist: %+v, want its newer copy", e)
			}
		default:
			if e != before[id] {
				t.Fatalf("job %d, unchanged, was encoded again", id)
			}
		}
	}
}
