package state

import (
	"bytes"
	"encoding/json"
	"testing"
)

// jobVersion is a job as encoded, and its version, before a command.
type jobVersion struct {
	ver uint64
	b   []byte
}

// jobVersions records every job and its version; checkJobVersions, after
// the command, fails the test if a job changed but kept its version: a
// change apply made without touching the job, which a reader keeping
// copies (sched.Snapshotter) would miss. harness.apply runs it around
// every command of every test.
func (h *harness) jobVersions() map[uint64]jobVersion {
	h.t.Helper()
	out := make(map[uint64]jobVersion, len(h.f.d.Jobs))
	for id, j := range h.f.d.Jobs {
		b, err := json.Marshal(j)
		if err != nil {
			h.t.Fatal(err)
		}
		out[id] = jobVersion{ver: h.f.jobs.vers.of(id), b: b}
	}
	return out
}

func (h *harness) checkJobVersions(ct CommandType, before map[uint64]jobVersion) {
	h.t.Helper()
	for id, j := range h.f.d.Jobs {
		was, ok := before[id]
		ver := h.f.jobs.vers.of(id)
		if !ok {
			if ver <= h.f.jobs.vers.base {
				h.t.Fatalf("%s added job %d without a version of its own", ct, id)
			}
			continue
		}
		b, err := json.Marshal(j)
		if err != nil {
			h.t.Fatal(err)
		}
		if ver == was.ver && !bytes.Equal(b, was.b) {
			h.t.Fatalf("%s changed job %d without touching it (version %d):\nbefore %s\nafter  %s", ct, id, ver, was.b, b)
		}
		if ver < was.ver {
			h.t.Fatalf("%s: job %d's version went back from %d to %d", ct, id, was.ver, ver)
		}
	}
}

// TestJobVersionsRestart: a state restored from a snapshot numbers every
// job above any version handed out before, so no copy taken before the
// restore passes for current.
func TestJobVersionsRestart(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdJobSubmit, spec("acme", "research", 1))
	h.must(CmdJobSubmit, spec("acme", "research", 2))
	var high uint64
	for id := range h.f.d.Jobs {
		high = max(high, h.f.jobs.vers.of(id))
	}
	snap := h.snapshot()
	r := New()
	r.jobs.vers = h.f.jobs.vers // the same FSM, restored in place
	if err := r.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	for id := range r.d.Jobs {
		if v := r.jobs.vers.of(id); v <= high {
			t.Errorf("job %d restored at version %d; versions before the restore reach %d", id, v, high)
		}
	}
}
