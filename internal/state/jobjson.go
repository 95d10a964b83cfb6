package state

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A job's JSON is written here as json.Marshal makes it, without
// reflection: a member's snapshot encodes the ~30,000 jobs changed since
// its last one, and json.Marshal of them was ~45 % of Persist's CPU at
// 1,000 submits a second (issue 18), most of it walking the struct by
// reflection and time.Time's MarshalJSON (an allocation and a compaction
// per time). TestJobJSONAsMarshal fills every field of domain.Job through
// reflection and compares the bytes with json.Marshal's.

// appendJobJSON appends j's JSON as json.Marshal makes it: fields in
// declaration order (JobSpec's promoted where it is embedded), omitempty
// and omitzero as tagged, strings escaped as encoding/json does (HTML's
// < > &, U+2028 and U+2029, invalid UTF-8 as U+FFFD). ok is false, and
// the bytes to be dropped, when j holds a value json.Marshal refuses (a
// time RFC 3339 cannot hold, a NaN or infinite share): encoding/json
// says why.
//
// The buffer is passed along and returned, not kept in a struct behind a
// pointer: storing the slice there took a write barrier at every append
// while a collection ran. ok is carried the same way, false once a value
// was refused.
func appendJobJSON(b []byte, j *domain.Job) (_ []byte, ok bool) {
	ok = true
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, j.ID, 10)
	b, ok = appendSpecJSON(b, &j.JobSpec, ok)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(j.State))
	if j.Reason != nil {
		b = append(b, `,"reason":`...)
		b, ok = appendReasonJSON(b, j.Reason, ok)
	}
	if len(j.Placement) > 0 {
		b = append(b, `,"placement":`...)
		b, ok = appendPlacementsJSON(b, j.Placement, ok)
	}
	b = append(b, `,"submittedAt":`...)
	b, ok = appendJSONTime(b, j.SubmittedAt, ok)
	if j.SubmittedBy != "" {
		b = append(b, `,"submittedBy":`...)
		b = appendJSONString(b, j.SubmittedBy)
	}
	b = append(b, `,"updatedAt":`...)
	b, ok = appendJSONTime(b, j.UpdatedAt, ok)
	b, ok = appendJSONTimePtr(b, `,"placedAt":`, j.PlacedAt, ok)
	if j.NetworkRev != 0 {
		b = append(b, `,"networkRevision":`...)
		b = strconv.AppendUint(b, j.NetworkRev, 10)
	}
	b, ok = appendJSONTimePtr(b, `,"startedAt":`, j.StartedAt, ok)
	b, ok = appendJSONTimePtr(b, `,"lastReport":`, j.LastReport, ok)
	b, ok = appendJSONTimePtr(b, `,"endedAt":`, j.EndedAt, ok)
	b, ok = appendJSONTimePtr(b, `,"stopDeadline":`, j.StopDeadline, ok)
	if j.PreemptedFor != 0 {
		b = append(b, `,"preemptedFor":`...)
		b = strconv.AppendUint(b, j.PreemptedFor, 10)
	}
	if j.Requeues != 0 {
		b = append(b, `,"requeues":`...)
		b = strconv.AppendInt(b, int64(j.Requeues), 10)
	}
	b, ok = appendJSONTimePtr(b, `,"borrowNotBefore":`, j.BorrowNotBefore, ok)
	if j.Message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, j.Message)
	}
	if len(j.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i := range j.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendReasonJSON(b, &j.Warnings[i], ok)
		}
		b = append(b, ']')
	}
	if p := j.PathHealth; p != nil {
		b = append(b, `,"pathHealth":{"verdict":`...)
		b = appendJSONString(b, string(p.Verdict))
		b = append(b, `,"since":`...)
		b, ok = appendJSONTime(b, p.Since, ok)
		if p.Message != "" {
			b = append(b, `,"message":`...)
			b = appendJSONString(b, p.Message)
		}
		b = append(b, '}')
	}
	if len(j.Runs) > 0 {
		b = append(b, `,"runs":[`...)
		for i := range j.Runs {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendRunJSON(b, &j.Runs[i], ok)
		}
		b = append(b, ']')
	}
	if j.RunsArchived != 0 {
		b = append(b, `,"runsArchived":`...)
		b = strconv.AppendInt(b, int64(j.RunsArchived), 10)
	}
	b = append(b, '}')
	return b, ok
}

// appendSpecJSON writes JobSpec's fields, each after a comma: they follow
// the job's id.
func appendSpecJSON(b []byte, s *domain.JobSpec, ok bool) ([]byte, bool) {
	if s.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, s.Name)
	}
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, s.Tenant)
	b = append(b, `,"workspace":`...)
	b = appendJSONString(b, s.Workspace)
	if s.GPUs != 0 {
		b = append(b, `,"gpus":`...)
		b = strconv.AppendInt(b, int64(s.GPUs), 10)
	}
	if s.MIGProfile != "" {
		b = append(b, `,"migProfile":`...)
		b = appendJSONString(b, s.MIGProfile)
	}
	if s.MIGCount != 0 {
		b = append(b, `,"migCount":`...)
		b = strconv.AppendInt(b, int64(s.MIGCount), 10)
	}
	if s.Share != 0 {
		b = append(b, `,"share":`...)
		b, ok = appendJSONFloat(b, s.Share, ok)
	}
	if s.GPUsPerNode != 0 {
		b = append(b, `,"gpusPerNode":`...)
		b = strconv.AppendInt(b, int64(s.GPUsPerNode), 10)
	}
	if s.GPUModel != "" {
		b = append(b, `,"gpuModel":`...)
		b = appendJSONString(b, s.GPUModel)
	}
	if len(s.GPUModels) > 0 {
		b = append(b, `,"gpuModels":`...)
		b = appendJSONStrings(b, s.GPUModels)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(s.Priority), 10)
	b = append(b, `,"preemptible":`...)
	b = strconv.AppendBool(b, s.Preemptible)
	if s.TimeLimitSeconds != 0 {
		b = append(b, `,"timeLimitSeconds":`...)
		b = strconv.AppendInt(b, s.TimeLimitSeconds, 10)
	}
	if s.MinRuntimeSeconds != 0 {
		b = append(b, `,"minRuntimeSeconds":`...)
		b = strconv.AppendInt(b, s.MinRuntimeSeconds, 10)
	}
	if s.ExpectedDurationSeconds != 0 {
		b = append(b, `,"expectedDurationSeconds":`...)
		b = strconv.AppendInt(b, s.ExpectedDurationSeconds, 10)
	}
	if t := s.Topology; t != nil {
		b = append(b, `,"topology":{"level":`...)
		b = appendJSONString(b, t.Level)
		b = append(b, `,"required":`...)
		b = strconv.AppendBool(b, t.Required)
		b = append(b, '}')
	}
	if s.MinDriver != "" {
		b = append(b, `,"minDriver":`...)
		b = appendJSONString(b, s.MinDriver)
	}
	if s.Driver != "" {
		b = append(b, `,"driver":`...)
		b = appendJSONString(b, s.Driver)
	}
	if s.ExternalID != "" {
		b = append(b, `,"externalId":`...)
		b = appendJSONString(b, s.ExternalID)
	}
	if s.CPUMilli != 0 {
		b = append(b, `,"cpuMilli":`...)
		b = strconv.AppendInt(b, s.CPUMilli, 10)
	}
	if s.MemoryMiB != 0 {
		b = append(b, `,"memoryMiB":`...)
		b = strconv.AppendInt(b, s.MemoryMiB, 10)
	}
	if s.Pool != "" {
		b = append(b, `,"pool":`...)
		b = appendJSONString(b, s.Pool)
	}
	return b, ok
}

func appendReasonJSON(b []byte, r *domain.Reason, ok bool) ([]byte, bool) {
	b = append(b, `{"code":`...)
	b = appendJSONString(b, r.Code)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, r.Message)
	if v := r.Reservation; v != nil {
		b = append(b, `,"reservation":{`...)
		if !v.Start.IsZero() { // omitzero: by IsZero, any zone
			b = append(b, `"start":`...)
			b, ok = appendJSONTime(b, v.Start, ok)
			b = append(b, ',')
		}
		b = append(b, `"placement":`...)
		if v.Placement == nil {
			b = append(b, "null"...)
		} else {
			b, ok = appendPlacementsJSON(b, v.Placement, ok)
		}
		b = append(b, `,"basis":`...)
		b = appendJSONStrings(b, v.Basis)
		b = append(b, '}')
	}
	b = append(b, '}')
	return b, ok
}

func appendPlacementsJSON(b []byte, ps []domain.Placement, ok bool) ([]byte, bool) {
	b = append(b, '[')
	for i := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		p := &ps[i]
		b = append(b, `{"server":`...)
		b = appendJSONString(b, p.Server)
		b = append(b, `,"gpus":`...)
		if p.GPUs == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for k, g := range p.GPUs {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(g), 10)
			}
			b = append(b, ']')
		}
		if len(p.MIG) > 0 {
			b = append(b, `,"mig":[`...)
			for k := range p.MIG {
				if k > 0 {
					b = append(b, ',')
				}
				m := &p.MIG[k]
				b = append(b, `{"gpu":`...)
				b = strconv.AppendInt(b, int64(m.GPU), 10)
				b = append(b, `,"profile":`...)
				b = appendJSONString(b, m.Profile)
				b = append(b, `,"start":`...)
				b = strconv.AppendInt(b, int64(m.Start), 10)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		if p.Share != 0 {
			b = append(b, `,"share":`...)
			b, ok = appendJSONFloat(b, p.Share, ok)
		}
		if p.NVLinkDomain != "" {
			b = append(b, `,"nvlinkDomain":`...)
			b = appendJSONString(b, p.NVLinkDomain)
		}
		if len(p.Leaves) > 0 {
			b = append(b, `,"leaves":`...)
			b = appendJSONStrings(b, p.Leaves)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return b, ok
}

func appendRunJSON(b []byte, r *domain.Run, ok bool) ([]byte, bool) {
	b = append(b, `{"start":`...)
	b, ok = appendJSONTime(b, r.Start, ok)
	b, ok = appendJSONTimePtr(b, `,"end":`, r.End, ok)
	b = append(b, `,"gpus":`...)
	b = strconv.AppendInt(b, int64(r.GPUs), 10)
	b = append(b, `,"units":`...)
	b = strconv.AppendInt(b, int64(r.Units), 10)
	if r.BorrowedUnits != 0 {
		b = append(b, `,"borrowedUnits":`...)
		b = strconv.AppendInt(b, int64(r.BorrowedUnits), 10)
	}
	b = append(b, '}')
	return b, ok
}

// appendJSONStrings writes a list of strings, null for nil.
func appendJSONStrings(b []byte, xs []string) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONTimePtr writes key and *t, or nothing for nil (omitempty).
func appendJSONTimePtr(b []byte, key string, t *time.Time, ok bool) ([]byte, bool) {
	if t == nil {
		return b, ok
	}
	b = append(b, key...)
	return appendJSONTime(b, *t, ok)
}

// appendJSONTime writes t as its MarshalJSON does: RFC 3339 with
// nanoseconds, refused (not ok) for a year outside [0,9999] or a zone of
// 24 hours or more.
func appendJSONTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	b = append(b, '"')
	n := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	ok = ok && strictRFC3339(b[n:])
	return append(b, '"'), ok
}

// appendJSONFloat writes f as encoding/json does (ES6's number to string:
// 'f' but for the very small and large, exponent unpadded); NaN and
// infinities are refused (not ok).
func appendJSONFloat(b []byte, f float64, ok bool) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, ok
}

// appendJSONString writes s quoted as json.Marshal does (HTML escaped):
// control characters, quote and backslash escaped, < > & as \u003c
// \u003e \u0026, U+2028 and U+2029 as \u2028 \u2029, each invalid UTF-8
// byte as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
