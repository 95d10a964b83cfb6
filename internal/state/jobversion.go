package state

// jobVersions numbers the changes of jobs, so that a reader that keeps
// copies between reads (the scheduling loop's sched.Snapshotter) copies
// again only the jobs that changed: a snapshot of 10,000 live jobs then
// holds the read lock for a look-up per job, not a deep copy of each.
//
// Every change apply makes to a job touches it (jobIndex.touch): the
// number only grows, so a job's version differs from any version a copy
// of it was taken at once it changed. Versions are derived, never
// persisted: a restore starts a new base above every number handed out,
// so copies taken before it are all stale.
type jobVersions struct {
	gen  uint64            // the last number handed out
	base uint64            // the version of every job not touched since the index was built
	ver  map[uint64]uint64 // the jobs touched since, by ID
}

// touch records that job id changed (or was added).
func (v *jobVersions) touch(id uint64) {
	v.gen++
	if v.ver == nil {
		v.ver = map[uint64]uint64{}
	}
	v.ver[id] = v.gen
}

// of is job id's version.
// forget drops a job that left the state (retention): its number is
// needed no more, and the map would otherwise grow with every job.
func (v *jobVersions) forget(id uint64) { delete(v.ver, id) }

func (v *jobVersions) of(id uint64) uint64 {
	if n, ok := v.ver[id]; ok {
		return n
	}
	return v.base
}

// restart is the numbering for a state rebuilt from a snapshot: every job
// gets a version no copy was taken at.
func (v *jobVersions) restart() jobVersions {
	return jobVersions{gen: v.gen + 1, base: v.gen + 1}
}
