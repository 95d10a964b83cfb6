package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/state"
)

// The fabric loop's deploys. A device deploys one revision at a time, and
// a slow or stuck device holds up no other: a round starts a deploy on
// every device that is out of date and idle, and returns without waiting;
// a device still deploying keeps its revision (a reload is never cut off:
// its own timeout, Config.DeployTimeout, is the only bound) and, when it
// ends, gets the newest revision (those committed meanwhile are skipped).
// Outcomes are recorded with a fresh context, batched: while one is being
// committed, the ones that end meanwhile wait and go in the next command.

// defaultDeployTimeout bounds one device's deploy when Config.DeployTimeout
// is 0: an frr-reload of a large leaf's config takes seconds, a loaded
// switch's much longer.
const defaultDeployTimeout = 2 * time.Minute

// maxParallelDeploys bounds the devices deploying at once, across rounds.
const maxParallelDeploys = 8

// maxRevTimers bounds the revisions timed at once (a device stuck for its
// whole timeout while revisions are committed); the oldest are dropped.
const maxRevTimers = 64

// deploys is the leader's memory of the devices' deploys (a new leader
// starts afresh; a deploy a former leader left in flight ends at its
// timeout, and its outcome, refused by the store, is deployed again).
type deploys struct {
	mu       sync.Mutex
	inFlight map[string]*inflight // device -> its deploy
	pending  []*inflight          // ended, to record
	// recording: a goroutine records pending (one at a time, so results
	// that end meanwhile are batched).
	recording bool
	timers    map[uint64]*revDeployTimer
	sem       chan struct{}
	wg        sync.WaitGroup // every deploy and recorder goroutine
}

// inflight is one device's deploy of revision rev.
type inflight struct {
	device string
	rev    uint64
	res    *state.DeployResult // nil: not started (the caller gave up)
	err    error               // recording the result failed
	done   chan struct{}       // closed once the result is recorded
}

// revDeployTimer times a revision from its first deploy round until every
// device runs it or a newer one (jobfabric_fabric_revision_deploy_seconds,
// `fabric status`). The leader's memory: a new leader times the next
// revision.
type revDeployTimer struct {
	rev     uint64
	start   time.Time
	rounds  int
	devices int
	// want is every device's configuration hash at rev: a device whose
	// deployed configuration is that one is in sync with rev too.
	want map[string]string
}

// deployFabric starts the deploy of every device whose deployed
// configuration is not the desired one and that has no deploy in flight
// (with only: of those devices only), and returns what it started and the
// deploys in flight it left the device to (queued: the device gets the
// newest revision when it ends). retry also deploys devices whose last
// deploy failed. It does not wait for the deploys.
//
// A device's deploy, once started, is not cancelled by ctx (the loop's, or
// a `fabric deploy` request's) but only by its own timeout, so a reload is
// never cut off because the caller ran out of time; when ctx ends, devices
// not started yet (waiting for one of the maxParallelDeploys slots) are
// left for the next round. The outcomes are committed with a fresh
// context, so devices that made it are recorded in sync and not
// redeployed.
func (s *Server) deployFabric(ctx context.Context, retry bool, only map[string]bool) (started, busy []*inflight) {
	ds := &s.deploys
	// Under the lock, so that a deploy's result is either in the state or
	// its device is still in flight (recorded before it leaves inFlight).
	ds.mu.Lock()
	defer ds.mu.Unlock()
	st := s.fsm.FabricStatus()
	// The latest revision the verifier did not block: a blocked one is
	// for the record, and no device gets any of it.
	cfgs, rev := s.fsm.DeployTarget()
	if rev == 0 {
		return nil, nil
	}
	var todo []deploy.Device
	for _, d := range st.Devices {
		want, ok := cfgs[d.Name]
		if !ok || d.Deployed == want.Hash || (d.Error != "" && !retry) || (only != nil && !only[d.Name]) {
			continue
		}
		if f := ds.inFlight[d.Name]; f != nil {
			busy = append(busy, f)
			continue
		}
		dc := cfgs[d.Name]
		dd := deploy.Device{Name: d.Name, NOS: dc.NOS, Rev: rev, Hash: dc.Hash, Files: renderFiles(dc.Files)}
		if d.DeployedRev != 0 {
			// What the switch runs, to tell what the deploy changes
			// (unknown when the revision is no longer kept).
			if prev, _, derr := s.fsm.DeviceConfigs(d.DeployedRev); derr == nil {
				dd.Previous = renderFiles(prev[d.Name].Files)
			}
		}
		todo = append(todo, dd)
	}
	if len(todo) == 0 && len(busy) == 0 {
		return nil, nil
	}
	if ds.timers == nil {
		ds.inFlight, ds.timers, ds.sem = map[string]*inflight{}, map[uint64]*revDeployTimer{}, make(chan struct{}, maxParallelDeploys)
	}
	t := ds.timers[rev]
	if t == nil {
		t = &revDeployTimer{rev: rev, start: time.Now(), want: map[string]string{}}
		for name, dc := range cfgs {
			t.want[name] = dc.Hash
		}
		ds.timers[rev] = t
		for len(ds.timers) > maxRevTimers {
			delete(ds.timers, slices.Min(slices.Collect(maps.Keys(ds.timers))))
		}
	}
	if len(todo) == 0 {
		return nil, busy
	}
	t.rounds++
	// Every deploy is linted first, whichever driver applies it; a driver
	// that can ask its switches comes already wrapped, with its Show.
	chk, ok := s.driver.(*deploy.Checked)
	if !ok {
		chk = &deploy.Checked{Driver: s.driver}
	}
	// The lint's platform rules come from each switch's inventory entry.
	names := make([]string, len(todo))
	for i, d := range todo {
		names[i] = d.Name
	}
	switches := s.fsm.Switches(names...)
	timeout := s.cfg.DeployTimeout
	if timeout <= 0 {
		timeout = defaultDeployTimeout
	}
	for _, d := range todo {
		if sw, ok := switches[d.Name]; ok {
			d.Switch = &sw
		}
		f := &inflight{device: d.Name, rev: rev, done: make(chan struct{})}
		ds.inFlight[d.Name] = f
		started = append(started, f)
		ds.wg.Add(1)
		go func() {
			defer ds.wg.Done()
			f.res = s.deployOne(ctx, chk, d, timeout)
			s.recordDeploy(ctx, f)
		}()
	}
	return started, busy
}

// deployOne deploys d within its own timeout, once one of the parallel
// slots is free; nil when ctx ended before it started.
func (s *Server) deployOne(ctx context.Context, chk *deploy.Checked, d deploy.Device, timeout time.Duration) *state.DeployResult {
	select {
	case s.deploys.sem <- struct{}{}:
	case <-ctx.Done():
		return nil // not started: the next round deploys it
	}
	defer func() { <-s.deploys.sem }()
	if ctx.Err() != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	res := &state.DeployResult{Device: d.Name, Hash: d.Hash}
	start := time.Now()
	conds, err := chk.ApplyConditions(dctx, d)
	took := time.Since(start)
	s.metrics.DeployDuration.WithLabelValues(d.Name).Observe(took.Seconds())
	if err != nil {
		if dctx.Err() != nil {
			err = fmt.Errorf("%w (the device's deploy timeout is %s)", err, timeout)
		}
		res.Error = err.Error()
		s.metrics.DeployFailures.WithLabelValues(d.Name).Inc()
		s.log.Warn("fabric deploy failed", "device", d.Name, "rev", d.Rev, "took", took, "err", err)
	} else {
		s.log.Info("fabric deployed", "device", d.Name, "rev", d.Rev, "took", took)
	}
	res.Conditions = conds
	for _, c := range conds {
		if !c.OK {
			s.log.Warn("fabric deploy: switch condition", "device", d.Name, "type", c.Type, "reason", c.Reason, "msg", c.Message)
		}
	}
	return res
}

// recordDeploy queues f's outcome to be committed, and commits the queue
// unless another goroutine is at it.
func (s *Server) recordDeploy(ctx context.Context, f *inflight) {
	ds := &s.deploys
	ds.mu.Lock()
	if f.res == nil {
		delete(ds.inFlight, f.device)
		ds.mu.Unlock()
		close(f.done)
		return
	}
	ds.pending = append(ds.pending, f)
	if ds.recording {
		ds.mu.Unlock()
		return
	}
	ds.recording = true
	ds.mu.Unlock()
	for {
		ds.mu.Lock()
		batch := ds.pending
		ds.pending = nil
		if len(batch) == 0 {
			ds.recording = false
			ds.mu.Unlock()
			return
		}
		ds.mu.Unlock()
		// One command per revision, oldest first (a device has one
		// deploy at a time, so no device is in two).
		slices.SortStableFunc(batch, func(a, b *inflight) int { return cmp.Compare(a.rev, b.rev) })
		for i := 0; i < len(batch); {
			j := i
			cmd := state.FabricDeployedCmd{Rev: batch[i].rev}
			for ; j < len(batch) && batch[j].rev == cmd.Rev; j++ {
				cmd.Results = append(cmd.Results, *batch[j].res)
			}
			// A fresh context: what was applied is recorded even when
			// ctx ended while the devices deployed.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			_, err := s.propose(rctx, state.CmdFabricDeployed, "fabric", cmd)
			cancel()
			if err != nil {
				s.log.Warn("fabric deploy: recording the outcome", "rev", cmd.Rev, "devices", len(cmd.Results), "err", err)
				for _, f := range batch[i:j] {
					f.err = err
				}
			}
			i = j
		}
		ds.mu.Lock()
		behind := false
		latest := s.fsm.FabricStatus().Deployable
		for _, f := range batch {
			delete(ds.inFlight, f.device)
			if t := ds.timers[f.rev]; t != nil {
				t.devices++
			}
			behind = behind || f.rev < latest
		}
		s.timeRevisions()
		ds.mu.Unlock()
		for _, f := range batch {
			close(f.done)
		}
		if behind {
			select {
			case s.deployDone <- struct{}{}:
			default:
			}
		}
	}
}

// timeRevisions observes the deploy time of every timed revision that
// every device now runs, or a newer one (under deploys.mu).
func (s *Server) timeRevisions() {
	ds := &s.deploys
	if len(ds.timers) == 0 {
		return
	}
	st := s.fsm.FabricStatus()
	for _, rev := range slices.Sorted(maps.Keys(ds.timers)) {
		t := ds.timers[rev]
		if !slices.ContainsFunc(st.Devices, func(d state.DeviceState) bool {
			want, ok := t.want[d.Name]
			return ok && d.DeployedRev < rev && d.Deployed != want
		}) {
			delete(ds.timers, rev)
			took := time.Since(t.start)
			s.metrics.RevisionDeploy.Observe(took.Seconds())
			if l := s.lastRevDeploy.Load(); l == nil || l.Rev < rev {
				s.lastRevDeploy.Store(&api.RevisionDeploy{Rev: rev, Seconds: took.Seconds(), Rounds: t.rounds, Devices: t.devices})
			}
			s.log.Info("fabric revision deployed", "rev", rev, "took", took, "rounds", t.rounds, "device_deploys", t.devices)
		}
	}
}

// deployWait is a deploy round that waits (`fabric deploy`): it compiles
// (when compile), starts the deploys and waits for them and for those
// already in flight; a device that was busy gets the newest revision once
// its deploy ended (unless ctx ended). The deploys it started end and
// are recorded even when ctx ends first (their own timeout bounds them).
func (s *Server) deployWait(ctx context.Context, compile, retry bool) error {
	started, busy, err := s.fabricOnce(ctx, compile, retry)
	if err != nil {
		return err
	}
	errs := waitDeploys(started, busy)
	if len(busy) > 0 && ctx.Err() == nil {
		only := map[string]bool{}
		for _, f := range busy {
			only[f.device] = true
		}
		s.fabricMu.Lock()
		again, _ := s.deployFabric(ctx, retry, only)
		s.fabricMu.Unlock()
		errs = errors.Join(errs, waitDeploys(again, nil))
	}
	if errs != nil {
		return errs
	}
	return ctx.Err()
}

func waitDeploys(lists ...[]*inflight) error {
	var errs []error
	for _, l := range lists {
		for _, f := range l {
			<-f.done
			errs = append(errs, f.err)
		}
	}
	return errors.Join(errs...)
}
