package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	fsm "github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// Bounds of one run: about a minute in all with the cluster's start and the
// check.
const (
	loadFor    = 30 * time.Second
	clients    = 4
	maxOps     = 4000
	opTimeout  = 3 * time.Second
	killEvery  = 7 * time.Second
	downFor    = 1500 * time.Millisecond
	checkLimit = 2 * time.Minute
)

// never is the return time of an operation whose outcome is unknown: it may
// take effect at any time after its call.
const never = int64(1) << 62

// TestJobAPILinearizable drives three servers with concurrent clients
// (submits with Idempotency-Key and their retries, reads, cancels, lists),
// through any member, while the leader is killed (Close) and restarted on
// its data dir every few seconds; then checks the history against Model.
// A failed check writes the history as an HTML visualization (and JSON)
// and prints the path.
func TestJobAPILinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: three servers, leader kills and a linearizability check take about a minute; skipped with -short")
	}
	res, info, ops := runChaos(t, loadFor, true, false)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Fatalf("the job API is not linearizable under leader kills; visualization: %s", saveFailure(t, info, ops))
	default:
		t.Fatalf("the checker could not decide within %v on %d operations (%s); visualization: %s", checkLimit, len(ops), res, saveFailure(t, info, ops))
	}
}

// TestChaosCatchesStaleReads is the check's mutation test: the same
// clients, but reads answered from a follower's local state machine
// (neither forwarded to the leader nor behind a barrier), as a server that
// served reads locally would. A follower learns of a commit a heartbeat
// after the leader acknowledged it, so a read soon after a submit or a
// cancel misses it; the check must say so.
func TestChaosCatchesStaleReads(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: three servers and a linearizability check; skipped with -short")
	}
	res, _, ops := runChaos(t, 8*time.Second, false, true)
	if res != porcupine.Illegal {
		t.Fatalf("reads from a follower's local state passed the linearizability check (%s, %d operations): the check cannot catch stale reads", res, len(ops))
	}
}

// runChaos starts a cluster, runs the clients for load (killing and
// restarting the leader when kill is set; reading from followers when
// staleReads is set), closes the history with a list through the leader
// and checks it.
func runChaos(t *testing.T, load time.Duration, kill, staleReads bool) (porcupine.CheckResult, porcupine.LinearizationInfo, []porcupine.Operation) {
	t.Helper()
	fc := &faultyCluster{c: startCluster(t)}
	urls, token := fc.urls(), fc.c.AdminToken
	seedWorkload(t, fc.c.Client(fc.waitLeader(t)))

	rec := &recorder{start: time.Now()}
	var maxID atomic.Uint64
	ctx, stop := context.WithTimeout(context.Background(), load)
	defer stop()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{id: c, urls: urls, token: token, rec: rec, maxID: &maxID, rng: rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))}
			if staleReads {
				w.localRead = fc.followerRead
			}
			w.run(ctx)
		}()
	}
	kills := 0
	if kill {
		kills = fc.faults(ctx, t)
	}
	wg.Wait()

	// Everything back up; one last list through the leader closes the
	// history: every acknowledged job is there, in a state it may be in.
	fc.restartAll(t)
	final := &worker{id: clients, urls: urls, token: token, rec: rec, maxID: &maxID, rng: rand.New(rand.NewPCG(99, 99))}
	var jobs []domain.Job
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if jobs, ok = final.list(context.Background(), fc.waitLeader(t)); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no list answered within 30s after the faults ended")
		}
		time.Sleep(200 * time.Millisecond)
	}
	byName := map[string]uint64{}
	for _, j := range jobs {
		if prev, dup := byName[j.Name]; dup {
			t.Errorf("jobs %d and %d were both made by submits with key %s: a retried submit applied twice", prev, j.ID, j.Name)
		}
		byName[j.Name] = j.ID
	}

	fc.converged(t)

	ops := resolve(rec.history(), byName)
	t.Logf("%d kills; %s", kills, rec.summary())
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(Model, ops, checkLimit)
	t.Logf("checked %d operations in %v: %s", len(ops), time.Since(began).Round(time.Millisecond), res)
	return res, info, ops
}

// startCluster is the one place the test builds its three servers: a
// cluster secret or peer TLS, when a multi-server cluster needs one, goes
// here.
func startCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("JOBFABRIC_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := devcluster.Start(ctx, t.TempDir(), 3, devcluster.Options{Logger: logger, RaftTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// seedWorkload applies 4 servers x 8 GPUs and one workspace that may use
// 24 of them: jobs are placed, wait, and are placed again as others are
// cancelled, so the scheduler writes too.
func seedWorkload(t *testing.T, admin *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 8, BorrowLimit: 16}); err != nil {
		t.Fatal(err)
	}
}

// faultyCluster serialises the fault loop's changes to the cluster with the
// readers of its servers.
type faultyCluster struct {
	mu sync.Mutex
	c  *devcluster.Cluster
}

func (f *faultyCluster) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.c.Servers {
		out = append(out, s.URL()) // a restart keeps the address
	}
	return out
}

func (f *faultyCluster) waitLeader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		i := f.c.Leader()
		f.mu.Unlock()
		if i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faults kills the leader every killEvery and restarts it downFor later,
// until ctx ends; it returns the number of kills.
func (f *faultyCluster) faults(ctx context.Context, t *testing.T) int {
	kills := 0
	for {
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(killEvery):
		}
		f.mu.Lock()
		i := f.c.Leader()
		if i < 0 {
			f.mu.Unlock()
			continue
		}
		err := f.c.Stop(i)
		f.mu.Unlock()
		if err != nil {
			t.Logf("kill leader %d: %v", i+1, err)
		}
		kills++
		time.Sleep(downFor)
		rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		f.mu.Lock()
		err = f.c.Restart(rctx, i)
		f.mu.Unlock()
		cancel()
		if err != nil {
			t.Fatalf("restart server %d: %v", i+1, err)
		}
	}
}

func (f *faultyCluster) restartAll(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.c.Servers {
		if s != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := f.c.Restart(ctx, i)
		cancel()
		if err != nil {
			t.Fatalf("restart server %d: %v", i+1, err)
		}
	}
}

// converged waits until every member has applied the same log and
// asserts that their state machines hold the same jobs: replicas that
// applied the same entries and disagree are a bug no client read shows.
func (f *faultyCluster) converged(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		var idx []uint64
		var jobs []string
		for _, s := range f.c.Servers {
			idx = append(idx, s.State().AppliedIndex())
			b, _ := json.Marshal(s.State().Jobs(fsm.JobFilter{}))
			jobs = append(jobs, string(b))
		}
		f.mu.Unlock()
		if idx[0] == idx[1] && idx[1] == idx[2] {
			if jobs[0] != jobs[1] || jobs[1] != jobs[2] {
				t.Fatalf("members applied the same log (index %d) and hold different jobs", idx[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members did not converge within 30s: applied indexes %v", idx)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// followerRead is the mutant read: a follower's local state machine,
// without asking the leader or waiting for a barrier.
func (f *faultyCluster) followerRead(id uint64) (Output, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.c.Servers {
		if s == nil || s.IsLeader() {
			continue
		}
		return localJob(s, id), true
	}
	return Output{}, false
}

func localJob(s *server.Server, id uint64) Output {
	j, ok := s.State().Job(id)
	if !ok {
		return Output{Code: domain.CodeNotFound}
	}
	return Output{ID: j.ID, State: j.State}
}

// recorder collects the history; times are nanoseconds since start on the
// monotonic clock.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	count map[string]int
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(client int, call int64, in Input, out Output) {
	ret := r.now()
	if out.Unknown {
		ret = never
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out})
	if r.count == nil {
		r.count = map[string]int{}
	}
	what := "ok"
	switch {
	case out.Unknown:
		what = "unknown"
	case out.Code != "":
		what = string(out.Code)
	}
	r.count[in.Kind.String()+" "+what]++
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

func (r *recorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.count)
}

// worker is one client. Submits and cancels go over plain HTTP so the test
// sets the Idempotency-Key itself and tells the server's own 503 from a
// lost connection; reads go through internal/client.
type worker struct {
	id        int
	urls      []string
	token     string
	rec       *recorder
	maxID     *atomic.Uint64
	rng       *rand.Rand
	localRead func(id uint64) (Output, bool)
	n         int
}

func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil && w.rec.len() < maxOps {
		srv := w.rng.IntN(len(w.urls))
		switch p := w.rng.IntN(100); {
		case p < 40:
			w.submit(ctx, srv)
		case p < 70:
			w.get(ctx, srv, w.pickID())
		case p < 90:
			w.cancel(ctx, srv, w.pickID())
		default:
			w.list(ctx, srv)
		}
		time.Sleep(time.Duration(10+w.rng.IntN(20)) * time.Millisecond)
	}
}

// pickID names a job that exists, or now and then one just beyond.
func (w *worker) pickID() uint64 {
	return 1 + w.rng.Uint64N(w.maxID.Load()+1)
}

func (w *worker) saw(id uint64) {
	for {
		cur := w.maxID.Load()
		if id <= cur || w.maxID.CompareAndSwap(cur, id) {
			return
		}
	}
}

// submit sends one job with a fresh key and, while the outcome is unknown,
// retries it with the same key through other members. The attempts are one
// operation of the history, from the first call to the first answer (or
// never): the job was made at some point in between, by whichever attempt.
// Now and then a settled submit is sent once more with its key, which must
// answer the same job.
func (w *worker) submit(ctx context.Context, srv int) {
	w.n++
	key := fmt.Sprintf("c%d-%d", w.id, w.n)
	// The job is named after its key: the final list says which unanswered
	// submits took effect, and a key applied twice shows as two jobs.
	body, _ := json.Marshal(domain.JobSpec{Tenant: "acme", Workspace: "research", Name: key, GPUs: 1 + w.rng.IntN(2)})
	in := Input{Kind: Submit, Key: key}
	call := w.rec.now()
	out := Output{Unknown: true}
	for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		if o := w.post(ctx, w.urls[(srv+attempt)%len(w.urls)]+"/v1/jobs", key, body, http.StatusCreated, true); !o.Unknown && !o.Unsent {
			out = o
			break
		}
	}
	w.rec.add(w.id, call, in, out)
	w.readBack(ctx, out)
	if !out.Unknown && w.rng.IntN(10) == 0 {
		call := w.rec.now()
		if o := w.post(ctx, w.urls[w.rng.IntN(len(w.urls))]+"/v1/jobs", key, body, http.StatusCreated, true); !o.Unsent {
			w.rec.add(w.id, call, in, o)
		}
	}
}

func (w *worker) cancel(ctx context.Context, srv int, id uint64) {
	call := w.rec.now()
	out := w.post(ctx, w.urls[srv]+"/v1/jobs/"+strconv.FormatUint(id, 10)+"/cancel", "", nil, http.StatusOK, false)
	if !out.Unsent {
		w.rec.add(w.id, call, Input{Kind: Cancel, ID: id}, out)
	}
	w.readBack(ctx, out)
}

// readBack reads an acknowledged job again at once, half of the time,
// through any member: a read after a write must see it.
func (w *worker) readBack(ctx context.Context, out Output) {
	if out.Unknown || out.Unsent || out.Code != "" || w.rng.IntN(2) == 0 {
		return
	}
	w.get(ctx, w.rng.IntN(len(w.urls)), out.ID)
}

// post sends one attempt and classifies the answer. retrySafe: the
// request carries an Idempotency-Key, so a 503 may follow an applied
// command (the server asks for a retry) and is unknown; without one a 503
// promises nothing was applied.
func (w *worker) post(ctx context.Context, url, key string, body []byte, okStatus int, retrySafe bool) Output {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic(err) // URLs come from running servers
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Output{Unsent: true} // the member is down: nothing was sent
	}
	if err != nil {
		return Output{Unknown: true}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Output{Unknown: true}
	}
	if resp.StatusCode == okStatus {
		var j domain.Job
		if err := json.Unmarshal(b, &j); err != nil {
			return Output{Unknown: true}
		}
		w.saw(j.ID)
		return Output{ID: j.ID, State: j.State}
	}
	var de domain.Error
	if json.Unmarshal(b, &de) != nil || de.Code == "" {
		return Output{Unknown: true}
	}
	switch {
	case de.Code == domain.CodeInternal, de.Code == domain.CodeUnavailable && retrySafe:
		return Output{Unknown: true}
	}
	return Output{Code: de.Code}
}

// get reads one job; a read that fails is left out (it constrains nothing).
func (w *worker) get(ctx context.Context, srv int, id uint64) {
	call := w.rec.now()
	if w.localRead != nil {
		if out, ok := w.localRead(id); ok {
			w.rec.add(w.id, call, Input{Kind: Get, ID: id}, out)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	j, err := w.client(srv).Job(ctx, id)
	var out Output
	switch {
	case err == nil:
		w.saw(j.ID)
		out = Output{ID: j.ID, State: j.State}
	case domain.CodeOf(err) == domain.CodeNotFound:
		out = Output{Code: domain.CodeNotFound}
	default:
		return
	}
	w.rec.add(w.id, call, Input{Kind: Get, ID: id}, out)
}

// list reads every job; it returns them and whether it got an answer.
func (w *worker) list(ctx context.Context, srv int) ([]domain.Job, bool) {
	call := w.rec.now()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	// One request, one read: the list is paged (client.DefaultPageSize),
	// and pages read at different times are no single point of the history.
	js, err := w.client(srv).Jobs(ctx, client.JobQuery{PageSize: maxOps + 1})
	if err != nil {
		return nil, false
	}
	out := Output{Jobs: make([]JobView, 0, len(js))}
	for _, j := range js {
		out.Jobs = append(out.Jobs, JobView{ID: j.ID, State: j.State})
		w.saw(j.ID)
	}
	SortJobs(out.Jobs)
	w.rec.add(w.id, call, Input{Kind: List}, out)
	return js, true
}

// resolve settles unanswered submits from the final list, where each job
// carries its key as its name: a key with a job was applied and would have
// answered that job, Pending (its return time stays unknown); a key
// without one never applied, and its operation is dropped. Either way the
// checker no longer guesses which of several unanswered submits took which
// ID, a guess that grows factorially with their number.
func resolve(ops []porcupine.Operation, byName map[string]uint64) []porcupine.Operation {
	out := ops[:0:0]
	for _, op := range ops {
		in, o := op.Input.(Input), op.Output.(Output)
		if in.Kind == Submit && o.Unknown {
			id, applied := byName[in.Key]
			if !applied {
				continue
			}
			op.Output = Output{ID: id, State: domain.JobPending}
		}
		out = append(out, op)
	}
	return out
}

func (w *worker) client(srv int) *client.Client {
	c, err := client.New(w.urls[srv], w.token, nil)
	if err != nil {
		panic(err) // URLs come from running servers
	}
	c.RetryFor = 0 // one attempt: a retry is the test's to make and record
	return c
}

// saveFailure writes the checked history as HTML (porcupine's
// visualization: each client's operations on a time line, the longest
// linearizable prefix and the model's state along it) and as JSON to a new
// temporary directory, kept after the test, and returns the HTML's path.
func saveFailure(t *testing.T, info porcupine.LinearizationInfo, ops []porcupine.Operation) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jobfabric-chaos-")
	if err != nil {
		return "(no temporary directory: " + err.Error() + ")"
	}
	if b, err := json.Marshal(ops); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "history.json"), b, 0o600)
	}
	p := filepath.Join(dir, "linearizability.html")
	if err := porcupine.VisualizePath(Model, info, p); err != nil {
		return "(visualization failed: " + err.Error() + ")"
	}
	return p
}
