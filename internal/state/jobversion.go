package state

// jobVersions numbers the changes of jobs, so that a reader that keeps
// copies between reads (the scheduling loop's sched.Snapshotter, the raft
// snapshot's encoded jobs, the fabric fingerprint) redoes only the jobs
// that changed: a snapshot of 100,000 live jobs then holds the read lock
// for the few changed since the last one, not a look-up per job.
//
// Every change apply makes to a job touches it (jobIndex.touch): the
// number only grows, so a job's version differs from any version a copy
// of it was taken at once it changed. The change log lists the jobs
// touched (or removed) after a generation, for the last changeLogMax
// changes; a reader further behind starts over (since says so). Versions
// and the log are derived, never persisted: a restore starts a new base
// above every number handed out, so copies taken before it are all stale.
type jobVersions struct {
	gen  uint64            // the last number handed out
	base uint64            // the version of every job not touched since the index was built
	ver  map[uint64]uint64 // the jobs touched since, by ID
	// log holds the jobs changed after logFrom, in order: log[i] was
	// changed at generation logFrom+i+1.
	log     []uint64
	logFrom uint64
}

// changeLogMax bounds the change log: about a minute of a busy leader's
// changes (1,000 submits and as many reports a second), 1 MiB of IDs. A
// reader that falls further behind copies everything once.
const changeLogMax = 1 << 17

// touch records that job id changed (or was added).
func (v *jobVersions) touch(id uint64) {
	v.gen++
	if v.ver == nil {
		v.ver = map[uint64]uint64{}
	}
	v.ver[id] = v.gen
	v.record(id)
}

// forget drops a job that left the state (retention): its number is
// needed no more, and the map would otherwise grow with every job. The
// log still names it, with a generation of its own, so readers drop
// their copies.
func (v *jobVersions) forget(id uint64) {
	delete(v.ver, id)
	v.gen++
	v.record(id)
}

// record appends id at generation v.gen, dropping the older half of the
// log when it is full (an amortised copy, no ring to wrap).
func (v *jobVersions) record(id uint64) {
	if len(v.log) == changeLogMax {
		half := changeLogMax / 2
		n := copy(v.log, v.log[half:])
		v.log = v.log[:n]
		v.logFrom += uint64(half)
	}
	v.log = append(v.log, id)
}

func (v *jobVersions) of(id uint64) uint64 {
	if n, ok := v.ver[id]; ok {
		return n
	}
	return v.base
}

// since is the jobs changed or removed after generation gen, in the order
// they changed (an ID may repeat), and whether the log still reaches back
// to gen: false when it does not (a reader that last read before the log's
// start, or before a restore), which must then read everything. The slice
// is the log's own: read it under the lock, do not keep it.
func (v *jobVersions) since(gen uint64) ([]uint64, bool) {
	if gen < v.logFrom || gen > v.gen { // logFrom is never below base
		return nil, false
	}
	return v.log[gen-v.logFrom:], true
}

// changeCursor is where a reader that keeps something per job between
// reads (the raft snapshot's jobs, the fabric fingerprint's) last read
// the change log.
type changeCursor struct {
	valid bool
	gen   uint64
}

// next is the jobs changed since the cursor's last read (an ID may
// repeat), or false when the reader must read every job (its first read,
// or the log no longer reaches back); it moves the cursor to now.
func (c *changeCursor) next(v *jobVersions) ([]uint64, bool) {
	changed, ok := v.since(c.gen)
	ok = ok && c.valid
	c.gen, c.valid = v.gen, true
	return changed, ok
}

// restart is the numbering for a state rebuilt from a snapshot: every job
// gets a version no copy was taken at, and the log starts empty there.
func (v *jobVersions) restart() jobVersions {
	return jobVersions{gen: v.gen + 1, base: v.gen + 1, logFrom: v.gen + 1}
}
