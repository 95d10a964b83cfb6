package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fileutil"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/metrics"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/telemetry"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Clock is the time source and what the server's loops wait on; tests
// inject tstime.Fake and step it.
type Clock = tstime.Clock

// Config configures one API server (one member of the control plane).
type Config struct {
	DataDir string
	Listen  string // API listen address host:port (":0" picks a port)
	// RaftAddr is where the raft transport listens; default: API port + 1000
	// on the same host. Giving it opens the listener (see Bootstrap).
	RaftAddr string
	// Bootstrap forms a cluster that other servers will join: the raft
	// transport listens from the first start. Without Bootstrap, Join or
	// RaftAddr, raft listens only when the stored configuration has other
	// members; a single server runs raft in memory and listens on nothing
	// but the API.
	Bootstrap bool
	// ClusterSecret authenticates raft peers (every member is given the
	// same one): TLS 1.3 with certificates under a CA derived from it. It
	// takes precedence over TLSCert/TLSCA for raft; those still serve the
	// API.
	ClusterSecret []byte
	// ClusterSecretFile is ClusterSecret read from a file, one secret a
	// line: the first issues this member's raft certificate, every one is
	// accepted from peers (a rotation's overlap). The file is reloaded like
	// the TLS files. Exclusive with ClusterSecret.
	ClusterSecretFile string
	// ReloadInterval is how often TLSCert, TLSKey, TLSCA and
	// ClusterSecretFile are read for a change (0: 5s); Reload (SIGHUP)
	// reads them at once.
	ReloadInterval time.Duration
	// InsecurePeers allows a raft listener that authenticates nobody: any
	// process that reaches the port can stop writes and rewrite the state.
	InsecurePeers bool
	// Advertise is the API URL other members forward to; default derived from Listen.
	Advertise string
	NodeID    string // default: read from or written to DATA_DIR/node-id
	// Join is the API URL of any member of an existing cluster; empty forms
	// (or reopens) a cluster of its own.
	Join      string
	JoinToken string // admin token used to join
	TLSCert   string
	TLSKey    string
	TLSCA     string // verifies peers (and the leader when forwarding)
	Logger    *slog.Logger
	Clock     Clock
	// ApplyRules is the highest apply-rules version this member applies
	// (state/rules.go); 0 is the binary's own, state.RulesLatest. A lower
	// one makes the member behave as an older binary would: tests of a
	// rolling upgrade.
	ApplyRules int
	// Halt is called when the state machine meets a log entry this
	// binary cannot apply (a state.UnappliableError); nil logs and exits
	// with ExitUnappliable. Tests record it instead.
	Halt func(error)
	// LogStore is the raft log store of a new data directory: "wal"
	// (store.LogStoreWAL, the default) or "bolt" (store.LogStoreBolt). A
	// data directory keeps the one it holds; naming the other fails Start
	// (docs/operations.md says how to move a member).
	LogStore string
	// Raft tuning, for tests and benchmarks; zero keeps the store's defaults.
	RaftTimeout time.Duration
	// ScheduleInterval is the leader's scheduling tick (changes also
	// trigger a cycle at once); 0 means 2s.
	ScheduleInterval time.Duration
	// SchedulerDuty is the largest share of wall time the leader's
	// scheduling loop spends in cycles: after a cycle of d, the next waits
	// d x (1/duty - 1), at most ScheduleInterval, so API requests keep
	// the CPU while a large queue is decided. 0 means 0.5; 1 runs cycles
	// back to back.
	SchedulerDuty float64
	// SchedulerQuietDuty is the share after a quiet cycle (nothing
	// placed, preempted or released): while only submits arrive, the next
	// cycle waits d x (1/quietDuty - 1), at most ScheduleInterval; any
	// other change or a due deadline waits the regular gap. 0 means 0.1;
	// above SchedulerDuty counts as SchedulerDuty.
	SchedulerQuietDuty float64
	// PreemptionGrace, ReclaimBackoff and FairShareHalfLife configure the
	// scheduler (0: its defaults, 30s, 5m and 1h).
	PreemptionGrace, ReclaimBackoff, FairShareHalfLife time.Duration
	// FabricDriver deploys device configurations: "file" (default: into
	// FabricDir, default DATA_DIR/fabric), "frr" (FRRTargets names the
	// running daemons), "ssh" (SSHTargets names remote FRR switches) or
	// "none" (no deploy, and no network gate: placed jobs are Ready at
	// once).
	FabricDriver string
	FabricDir    string
	FRRTargets   string
	SSHTargets   string
	// Driver, when set, is used instead of FabricDriver: a driver the
	// server does not build itself (the lab's, internal/lab/labdeploy,
	// injected by the CLI for --fabric-driver lab) or a test's.
	Driver deploy.Driver
	// IdleRecheck bounds how long the scheduling loop skips cycles while
	// the state is unchanged since a cycle that decided nothing (0: 15
	// scheduling intervals, 30s).
	IdleRecheck time.Duration
	// CheckSkippedCycles makes the scheduling loop decide every cycle it
	// skips anyway and count those that would have changed something
	// (tests: SkippedCycles).
	CheckSkippedCycles bool
	// CheckFabricCompile makes the fabric loop compile every input in
	// full as well as incrementally and fail the cycle when the two differ
	// (tests).
	CheckFabricCompile bool
	// fabricFault, set by tests only (InjectFabricFault), breaks every
	// intent the fabric loop compiles, as a compiler bug would, before
	// the verifier sees it.
	fabricFault func(fabric.Input, *fabric.Intent)
	// DeployTimeout bounds one device's deploy (lint and apply) in the
	// fabric loop; every device has its own (0: 2m). See deployFabric.
	DeployTimeout time.Duration
	// TokenUseFlush is how often the leader commits tokens' last-use
	// times (0: 10s); a token's is committed at most once a minute.
	TokenUseFlush time.Duration
	// Retention says how long ended jobs, events and the usage archive
	// are kept (internal/state retain.go; the --retain-* flags). Zero keeps
	// everything forever.
	Retention state.Retention
	// ListPage is how many items a paged list (GET /v1/jobs, GET
	// /v1/events) answers when the request names no limit; 0 is
	// DefaultPage, more than MaxPage is MaxPage. Tests set it small to
	// see clients follow the pages.
	ListPage int
	// RetainEvery is how often the leader runs a retention pass (0: 10m).
	RetainEvery time.Duration
	// Telemetry says what the leader scrapes and which push sources it
	// accepts (internal/telemetry; --telemetry-config). Zero: no targets,
	// no push sources.
	Telemetry telemetry.Config
	// Admission limits the API's clients per source before they have
	// authenticated (guard.go; the --api-* flags). Zero limits nothing.
	Admission Admission
	// RaftAdmission limits, at the Raft listener's accept, what a source
	// that is not a member may cost (store.Admission; the --raft-* flags).
	// Refused and Clock are set by Start. Zero limits nothing.
	RaftAdmission store.Admission
	// Health holds the path verdicts' thresholds and debounce
	// (internal/health; --health-config). Zero: the defaults.
	Health *health.Config
}

// Server is a running API server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	clock   Clock
	fsm     *state.FSM
	store   *store.Store
	http    *http.Server
	ln      net.Listener
	url     string
	nodeID  string
	fwd     atomicForwarder // replaced when the CA file changes
	rot     rotation        // the TLS and secret files, reloaded (rotate.go)
	guard   *guard          // Admission, at accept and at authentication
	routes  []route
	stop    context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool
	// fresh holds the connections that carry no request yet, which
	// Close cuts after freshGrace instead of net/http's 5 s.
	fresh    freshConns
	adminTok string
	kick     chan struct{}
	// kickUrgent: a kick since the last cycle began came from a change
	// other than a submit (it cuts a quiet cycle's gap short).
	kickUrgent atomic.Bool
	cycles     cycleCount // the scheduling loop's (schedule.go)
	// topoSem admits one topology upload at a time: parsing one holds
	// about 25 times its size in memory (handlers.go, putTopology).
	topoSem chan struct{}
	// driver deploys the fabric (nil: --fabric-driver none); fabricMu
	// serialises compile and deploy.
	driver     deploy.Driver
	fabricKick chan struct{}
	fabricMu   sync.Mutex
	// fabricComp is the fabric loop's incremental compiler (under
	// fabricMu).
	fabricComp fabricCompiler
	// deploys are the devices' deploys in flight, the results waiting to
	// be recorded and the revisions being timed (fabric_deploy.go).
	deploys deploys
	// deployDone wakes the fabric loop when a device finished behind the
	// latest revision.
	deployDone chan struct{}
	// lastRevDeploy is the latest revision deployed in full (read by
	// `fabric status` without waiting for a deploy in flight).
	lastRevDeploy atomic.Pointer[api.RevisionDeploy]
	// hosts is the leader's memory of node agents' heartbeats (hosts.go).
	hosts *hostWatch
	// runtimes is the leader's memory of runtimes' reports (liveness.go).
	runtimes *runtimeWatch
	// uses is the leader's memory of token uses (tokenuse.go).
	uses tokenUses
	// streams ends when the server shuts down, and with it every open
	// stream (watch.go): Shutdown waits for idle connections, and a stream
	// is never idle.
	streams    context.Context
	endStreams context.CancelFunc
	// metrics is this server's registry (metrics.go); reclaims is the
	// scheduling loop's memory of when the first reclaim for a job was
	// issued (schedule.go), for the reclaim latency.
	metrics  *metrics.Metrics
	reclaims map[uint64]time.Time
	// snaps builds the scheduling loop's snapshots, copying only the jobs
	// changed since its previous cycle (stateview.go); only the loop uses it.
	snaps sched.Snapshotter
	// carry keeps the cycle's sums over the jobs from one cycle to the
	// next (sched.Carry): the snapshots share unchanged job copies, so it
	// reads only the jobs that changed; only the loop uses it.
	carry sched.Carry
	// idle is the last cycle that decided nothing (schedule.go); only the
	// loop uses it. cyclesSkipped counts the cycles it skipped, skipWrong
	// those a check found would have changed something.
	idle                     idleCycle
	duty                     dutyGate // the loop's; only it touches it
	cyclesSkipped, skipWrong atomic.Uint64
	// telemetry holds the scraped and pushed counters (telemetry.go); the
	// leader scrapes.
	telemetry *telemetry.Store
	// queueOrder is the scheduling loop's latest queue order (queue.go).
	queueOrder atomic.Pointer[queueOrder]
	// health correlates telemetry to jobs (health.go).
	paths pathHealth
}

// Start opens the store, serves the API and, on a new single-server or
// bootstrap cluster, creates the first admin token.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if cfg.Clock == nil {
		cfg.Clock = tstime.Std{}
	}
	if cfg.DataDir == "" {
		return nil, domain.Invalid("data-dir", "a data directory is required")
	}
	switch cfg.LogStore {
	case "", store.LogStoreWAL, store.LogStoreBolt:
	default:
		return nil, domain.Invalid("log-store", "--log-store %q is not one of %s, %s", cfg.LogStore, store.LogStoreWAL, store.LogStoreBolt)
	}
	if err := checkDuty("scheduler-duty", cfg.SchedulerDuty); err != nil {
		return nil, err
	}
	if err := checkDuty("scheduler-quiet-duty", cfg.SchedulerQuietDuty); err != nil {
		return nil, err
	}
	if err := cfg.Admission.Check(); err != nil {
		return nil, err
	}
	if err := checkRaftAdmission(cfg.RaftAdmission); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := privateDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	nodeID, fresh, err := loadNodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("node", nodeID), clock: cfg.Clock, nodeID: nodeID, kick: make(chan struct{}, 1), topoSem: make(chan struct{}, 1), fabricKick: make(chan struct{}, 1), deployDone: make(chan struct{}, 1)}
	s.fsm = state.New(state.WithMaxRules(cfg.ApplyRules), state.WithHalt(haltFor(cfg, s.log.Error)))
	s.runtimes = newRuntimeWatch()
	s.fabricComp.check = cfg.CheckFabricCompile
	s.metrics, s.reclaims = metrics.New(), map[uint64]time.Time{}
	s.snaps.Clone = s.fsm.CopyOf // the raft snapshot's copies, made as apply changes jobs
	s.metrics.MustRegister(stateCollector{s.fsm})
	s.metrics.ReclaimBound.Set(s.reclaimBound().Seconds())
	s.paths.cfg = health.DefaultConfig()
	if cfg.Health != nil {
		if err := cfg.Health.Thresholds.Validate(); err != nil {
			return nil, err
		}
		s.paths.cfg = *cfg.Health
	}
	if s.telemetry, err = telemetry.NewStore(cfg.Telemetry, cfg.Clock, s.log.With("component", "telemetry")); err != nil {
		return nil, err
	}
	switch {
	case cfg.Driver != nil:
		s.driver = cfg.Driver
	case cfg.FabricDriver == "none":
	case cfg.FabricDriver == "ssh":
		if s.driver, err = deploy.New("ssh", "", cfg.SSHTargets); err != nil {
			return nil, err
		}
	case cfg.FabricDriver == "" || cfg.FabricDriver == "file" || cfg.FabricDriver == "frr":
		name, dir := cfg.FabricDriver, cfg.FabricDir
		if name == "" {
			name = "file"
		}
		if dir == "" {
			dir = filepath.Join(cfg.DataDir, "fabric")
		}
		if s.driver, err = deploy.New(name, dir, cfg.FRRTargets); err != nil {
			return nil, err
		}
		if fd, ok := s.driver.(*deploy.File); ok && within(cfg.DataDir, dir) {
			fd.Private = true
		}
	default:
		return nil, domain.Invalid("fabric-driver", "fabric driver %q is not one of file, frr, ssh, none", cfg.FabricDriver)
	}

	if cfg.ReloadInterval < 0 {
		return nil, domain.Invalid("reload-interval", "--reload-interval %s is negative", cfg.ReloadInterval)
	}
	s.rot.log, s.rot.clock = s.log.With("component", "tls"), cfg.Clock
	var serverTLS, peerTLS, apiTLS *tls.Config
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return nil, domain.Invalid("tls-cert", "--tls-cert and --tls-key must be given together")
		}
		r, err := tlsutil.NewReloader(tlsutil.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA}, cfg.Clock, s.rot.log)
		if err != nil {
			return nil, domain.Invalid(tlsFlag(err), "--%s: %v", tlsFlag(err), err)
		}
		s.rot.tls = r
		serverTLS, peerTLS = r.Current().ServerTLS(), r.Current().ClientTLS("")
		apiTLS = r.ServerConfig() // each handshake takes the certificate in use
	}
	var sec secrets
	switch {
	case cfg.ClusterSecretFile != "" && cfg.ClusterSecret != nil:
		return nil, domain.Invalid("cluster-secret-file", "a cluster secret is given both as bytes and as --cluster-secret-file: give one")
	case cfg.ClusterSecretFile != "":
		var raw []byte
		if sec, raw, err = readSecrets(cfg.ClusterSecretFile); err != nil {
			return nil, err
		}
		s.rot.secretPath, s.rot.secretInUse = cfg.ClusterSecretFile, sha256.Sum256(raw)
		s.rot.secretTried = s.rot.secretInUse
		s.rot.secret = secretStatus(sec)
		s.rot.secret.LoadedAt = cfg.Clock.Now()
		if fi, err := os.Stat(cfg.ClusterSecretFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			s.log.Warn("cluster secret file is readable by others than its owner; whoever reads it can join raft", "file", cfg.ClusterSecretFile, "mode", fi.Mode().Perm())
		}
	case cfg.ClusterSecret != nil:
		sec.issue = cfg.ClusterSecret
	}

	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:7070"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	s.ln = ln
	scheme := "http"
	if serverTLS != nil {
		scheme = "https"
	}
	s.url = cfg.Advertise
	if s.url == "" {
		s.url = scheme + "://" + advertiseHost(ln.Addr().String())
	}
	// Raft listens for a cluster being formed or joined; a restarted
	// member listens because its stored configuration has peers.
	raftListen := cfg.Join != "" || cfg.Bootstrap || cfg.RaftAddr != ""
	raftAddr := cfg.RaftAddr
	if raftAddr == "" {
		if raftAddr, err = defaultRaftAddr(ln.Addr().String()); err != nil && raftListen {
			ln.Close()
			return nil, err
		}
	}
	scfg := store.Config{
		NodeID: nodeID, DataDir: cfg.DataDir, LogStore: cfg.LogStore, RaftAddr: raftAddr, Listen: raftListen,
		Bootstrap: cfg.Join == "", InsecurePeers: cfg.InsecurePeers,
		FSM: s.fsm, Logger: s.log.With("component", "raft"),
		HeartbeatTimeout: cfg.RaftTimeout, ElectionTimeout: cfg.RaftTimeout, LeaderLeaseTimeout: cfg.RaftTimeout / 2,
		Admission: raftAdmission(cfg.RaftAdmission, cfg.Clock, s.metrics.RaftConnsRefused),
	}
	if sec.issue != nil {
		scfg.ClusterSecret, scfg.AcceptSecrets = sec.issue, sec.accept
	} else {
		scfg.TLS = serverTLS // PeerTLS defaults to the server certificate: raft peers use mTLS
	}
	st, err := store.Open(ctx, scfg)
	if err != nil {
		ln.Close()
		return nil, storeOpenError(err)
	}
	s.store = st
	registerRaftAdmission(s.metrics, st)
	s.fwd.Store(newForwarder(peerTLS))
	if s.rot.tls != nil {
		s.rot.tls.OnChange(s.tlsChanged)
	}
	s.metrics.MustRegister(tlsCollector{s})
	s.guard = newGuard(s, cfg.Admission)
	s.routes = append(append(append(append(s.buildRoutes(), s.nodeRoutes()...), s.poolRoutes()...), s.fabricRoutes()...), s.hostRoutes()...)
	s.routes = append(s.routes, s.telemetryRoutes()...)
	s.routes = append(s.routes, s.healthRoutes()...)
	s.routes = append(s.routes, s.usageRoutes()...)
	s.routes = append(s.routes, s.queueRoutes()...)
	s.streams, s.endStreams = context.WithCancel(context.Background())
	h, err := s.handler(serverTLS != nil)
	if err != nil {
		st.Shutdown()
		ln.Close()
		return nil, err
	}
	s.http = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         s.guard.tlsConfig(apiTLS),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.http.ConnState = s.fresh.track
	s.http.RegisterOnShutdown(s.endStreams)
	s.http.RegisterOnShutdown(func() { time.AfterFunc(freshGrace, s.fresh.closeAll) })
	runCtx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		// Over the limits, a connection is closed as it is accepted,
		// before TLS: a handshake costs a signature with the key.
		gl := s.guard.listener(ln)
		if serverTLS != nil {
			err = s.http.ServeTLS(gl, "", "")
		} else {
			err = s.http.Serve(gl)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("API server stopped", "err", err)
		}
	}()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.guard.trustLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.leaderLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.scheduleLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.fabricLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.hostLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.tokenUseLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.retainLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.telemetryLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.pathHealthLoop(runCtx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.reloadLoop(runCtx, cmp.Or(cfg.ReloadInterval, defaultReloadInterval)) }()

	if cfg.Join != "" {
		if err := s.join(ctx); err != nil {
			s.Close()
			return nil, err
		}
	} else if err := s.bootstrapAdmin(ctx, fresh); err != nil {
		s.Close()
		return nil, err
	}
	s.log.Info("jobfabric server started", "api", s.url, "admission", cfg.Admission.String(), "raft_admission", cfg.RaftAdmission.String(), "raft", st.Addr(), "raft_listening", st.Listening(), "peer_auth", st.PeerAuth())
	return s, nil
}

// storeOpenError names the flags behind the store's refusals.
func storeOpenError(err error) error {
	switch {
	case errors.Is(err, store.ErrWeakSecret):
		return domain.Invalid("cluster-secret-file", "--cluster-secret-file: %v (generate one with `jobfabric cluster secret`)", err)
	case errors.Is(err, store.ErrLogStore):
		return domain.Invalid("log-store", "--log-store: %v", err)
	case errors.Is(err, store.ErrUnauthenticatedPeers):
		return domain.Invalid("cluster-secret-file", "this server listens for raft peers (--bootstrap, --join, --raft-addr, or a member of a cluster), "+
			"so it must authenticate them: give every member the same --cluster-secret-file (generate one with `jobfabric cluster secret`), "+
			"or --tls-cert/--tls-key with --ca for mutual TLS. --insecure-peers instead lets anyone who reaches the raft port stop writes and rewrite the state (%v)", err)
	}
	return fmt.Errorf("open store: %w", err)
}

// URL is the API base URL of this server.
func (s *Server) URL() string { return s.url }

// ListenAddr is the bound API address (host:port).
func (s *Server) ListenAddr() string { return s.ln.Addr().String() }

// RaftAddr is the raft transport address; see RaftListening.
func (s *Server) RaftAddr() string { return s.store.Addr() }

// LogStore is the raft log store this server runs: "wal" or "bolt".
func (s *Server) LogStore() string { return s.store.LogStore() }

// RaftListening reports whether raft listens on the network; a single
// server's raft runs in memory.
func (s *Server) RaftListening() bool { return s.store.Listening() }

// PeerAuth is how raft peers are authenticated: "none" (nothing listens),
// "mtls", "secret" or "insecure".
func (s *Server) PeerAuth() string { return s.store.PeerAuth() }

// NodeID is this server's stable member ID.
func (s *Server) NodeID() string { return s.nodeID }

// AdminToken returns the bootstrap admin token if this start created it
// (shown once), else "".
func (s *Server) AdminToken() string { return s.adminTok }

// IsLeader reports whether this server leads the cluster.
func (s *Server) IsLeader() bool { return s.store.IsLeader() }

// SkippedCycles is how many scheduling cycles this server skipped on an
// unchanged state, and how many of those a check (CheckSkippedCycles)
// found would have changed something.
func (s *Server) SkippedCycles() (skipped, wrong uint64) {
	return s.cyclesSkipped.Load(), s.skipWrong.Load()
}

// Snapshot forces a Raft snapshot (tests, operators before upgrades).
func (s *Server) Snapshot(ctx context.Context) error { return s.store.Snapshot(ctx) }

// State exposes the read-only state machine (tests, the demo, benchmarks).
func (s *Server) State() *state.FSM { return s.fsm }

// Close stops the API and the store. Safe to call more than once.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Requests still running after 5 s do not stop the server from
		// closing: cut them.
		s.log.Warn("http shutdown: closing connections still open", "err", err)
		err = s.http.Close()
	}
	s.stop()
	s.wg.Wait()
	// Deploys in flight end at their own timeout, and are recorded.
	s.deploys.wg.Wait()
	if c, ok := s.driver.(io.Closer); ok && s.cfg.Driver == nil {
		// A driver the server built holds connections (ssh); one handed
		// to it is closed by its owner.
		err = errors.Join(err, c.Close())
	}
	return errors.Join(err, s.store.Shutdown())
}

// loadNodeID returns the data dir's node ID, creating it on first use
// (fresh reports that).
func loadNodeID(dir, given string) (id string, fresh bool, err error) {
	p := filepath.Join(dir, "node-id")
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if given != "" && given != id {
			return "", false, domain.Invalid("node-id", "data dir %s belongs to node %q, not %q", dir, id, given)
		}
		return id, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("read node id: %w", err)
	}
	id = given
	if id == "" {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", false, fmt.Errorf("generate node id: %w", err)
		}
		id = "node-" + hex.EncodeToString(r[:])
	} else if derr := domain.ValidateName("node-id", id); derr != nil {
		return "", false, derr
	}
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write node id: %w", err)
	}
	return id, true, nil
}

// privateDataDir makes the data dir and what the server keeps in it owner
// only (0700 directories, 0600 files), also in a data dir written by an
// older version: it holds the raft log and snapshots (token hashes, the
// whole state), the bootstrap admin token and the file driver's configs.
// New files are created private: the raft snapshot store is wrapped
// (store), the file driver is told (deploy.File.Private) and the server
// writes its own files 0600. Only the server's own entries are walked, so
// a data dir given by mistake (a home directory) keeps its other files.
func privateDataDir(dir string) error {
	if err := os.Chmod(dir, fileutil.PrivateDir); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	for _, name := range []string{"node-id", "admin.token", "admin.token.tmp", "raft", "fabric"} {
		if err := fileutil.Private(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// advertiseHost turns a bound address into one peers can dial: an
// unspecified host (0.0.0.0, ::) becomes loopback.
func advertiseHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func defaultRaftAddr(apiAddr string) (string, error) {
	host, port, err := net.SplitHostPort(advertiseHost(apiAddr))
	if err != nil {
		return "", fmt.Errorf("derive raft address from %s: %w", apiAddr, err)
	}
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p+1000 > 65535 {
		return "", domain.Invalid("raft-addr", "cannot derive a raft port from API port %s; give --raft-addr", port)
	}
	return net.JoinHostPort(host, fmt.Sprint(p+1000)), nil
}

// propose encodes and applies a command through Raft, returning the typed
// value or the FSM's refusal. The command is checked against the leader's
// state first, so a refused command never enters the log (where it would
// stay, be replicated and be replayed at every start); the FSM checks
// again when it applies.
func (s *Server) propose(ctx context.Context, t state.CommandType, actor string, payload any) (any, error) {
	// Checked and applied under the rules every member applies.
	// The check reads the command the entry decodes to, not the entry:
	// decoding what was just encoded doubled the leader's garbage per
	// command (issue 18).
	c, b, err := state.EncodeCommand(t, s.proposeRules(), s.clock.Now(), actor, payload)
	if err != nil {
		return nil, err
	}
	if derr := s.fsm.CheckCommand(c); derr != nil {
		return nil, derr
	}
	start := time.Now()
	resp, err := s.store.Apply(ctx, b)
	s.metrics.ApplyDuration.Observe(metrics.Since(start))
	if err != nil {
		var nl *store.NotLeaderError
		if errors.As(err, &nl) {
			return nil, domain.Errorf(domain.CodeUnavailable, "leadership changed while applying; retry (leader now %q)", nl.LeaderID)
		}
		if errors.Is(err, store.ErrUnknownOutcome) && !retrySafe(ctx) {
			// Not "unavailable": a blind retry could apply the command twice.
			return nil, domain.Errorf(domain.CodeInternal, "the command may or may not have been applied (leadership was lost while it was in flight); check before retrying: %v", err)
		}
		return nil, domain.Errorf(domain.CodeUnavailable, "replicated store did not accept the command: %v", err)
	}
	r, ok := resp.(*state.Result)
	if !ok {
		return nil, domain.Errorf(domain.CodeInternal, "unexpected apply response %T", resp)
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if actor != "scheduler" && t != state.CmdMemberSet && t != state.CmdTokensUsed && t != state.CmdJobsPathHealth {
		if t == state.CmdJobSubmit {
			s.kickForSubmit()
		} else {
			s.kickScheduler()
		}
	}
	return r.Value, nil
}

// publishSelf records this server's member record (raft and API
// addresses, rules) in the state unless the state holds it already: the
// address followers forward to.
func (s *Server) publishSelf(ctx context.Context) error {
	m := state.Member{ID: s.nodeID, RaftAddr: s.store.Addr(), APIAddr: s.url, Rules: s.fsm.MaxRules()}
	if cur, ok := s.fsm.Member(s.nodeID); ok && cur == m {
		return nil
	}
	_, err := s.propose(ctx, state.CmdMemberSet, "system", state.MemberSet{Member: m})
	return err
}

// leaderLoop records this server's API address whenever it gains
// leadership, so followers can forward to it.
func (s *Server) leaderLoop(ctx context.Context) {
	ch := s.store.LeaderCh()
	check := func() {
		if !s.store.IsLeader() {
			return
		}
		s.kickScheduler() // a new leader schedules at once
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.publishSelf(actx); err != nil {
			s.log.Warn("record leader address", "err", err)
		}
		s.learnRules(actx)
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case leader, ok := <-ch:
			if ok {
				s.metrics.LeaderChanges.Inc()
				s.log.Info("leadership changed", "leader", leader)
			}
			if !s.store.IsLeader() {
				s.runtimes.reset() // a later term's leader hears afresh
			}
			check()
		case <-t.C:
			check()
		}
	}
}

// bootstrapAdmin creates the first admin token when the state has none. The
// secret is shown once and written to DATA_DIR/admin.token (0600); the state
// keeps only its hash.
func (s *Server) bootstrapAdmin(ctx context.Context, fresh bool) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.store.WaitForLeader(wctx); err != nil {
		if !fresh {
			// A restarted member whose peers are not up yet: serve anyway;
			// writes answer "unavailable" until a leader is elected.
			s.log.Warn("no leader yet; serving without one", "err", err)
			return nil
		}
		return fmt.Errorf("wait for leader: %w", err)
	}
	if !s.store.IsLeader() {
		// A restarted member of a larger cluster: the leader holds the tokens.
		return nil
	}
	if err := s.store.Barrier(wctx); err != nil {
		return fmt.Errorf("catch up with the log: %w", err)
	}
	if s.fsm.HasAdminToken() {
		return nil
	}
	tok, secret, hash, err := newToken(domain.RoleAdmin, "", "", "bootstrap admin token")
	if err != nil {
		return err
	}
	path := filepath.Join(s.cfg.DataDir, "admin.token")
	if err := fileutil.WriteAtomic(path, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := s.propose(wctx, state.CmdTokenCreate, "system", state.TokenCreate{Token: tok, Hash: hash}); err != nil {
		os.Remove(path)
		return fmt.Errorf("store bootstrap token: %w", err)
	}
	s.adminTok = secret
	return nil
}

// newToken makes a token: jf_<id>_<secret>, where id names the token in the
// state and the whole string is hashed for storage.
func newToken(role domain.Role, tenant, workspace, desc string) (tok domain.Token, secret, hash string, err error) {
	var idb [6]byte
	var sb [32]byte
	if _, err = rand.Read(idb[:]); err != nil {
		return tok, "", "", fmt.Errorf("generate token id: %w", err)
	}
	if _, err = rand.Read(sb[:]); err != nil {
		return tok, "", "", fmt.Errorf("generate token secret: %w", err)
	}
	id := hex.EncodeToString(idb[:])
	secret = "jf_" + id + "_" + hex.EncodeToString(sb[:])
	tok = domain.Token{ID: id, Role: role, Tenant: tenant, Workspace: workspace, Description: desc}
	return tok, secret, state.HashSecret(secret), nil
}

// parseToken splits a bearer token into its id.
func parseToken(secret string) (id string, ok bool) {
	rest, found := strings.CutPrefix(secret, "jf_")
	if !found {
		return "", false
	}
	id, _, found = strings.Cut(rest, "_")
	return id, found && id != ""
}

// caughtUp waits until this server has applied its own member record,
// which the leader commits after adding it as a voter and after its own
// current address (joinMember): until then a request forwarded from here
// could go to an address the leader had before a restart (the state this
// member has applied so far), and fail.
func (s *Server) caughtUp(ctx context.Context) error {
	for {
		ch := s.fsm.Changed() // before the read: no change slips between
		if m, ok := s.fsm.Member(s.nodeID); ok && m.APIAddr == s.url {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("joined %s, but this server has not applied its own member record: %w", s.cfg.Join, ctx.Err())
		case <-ch:
		}
	}
}

// join asks an existing member to add this server as a voter, retrying
// while the cluster elects a leader.
func (s *Server) join(ctx context.Context) error {
	if s.cfg.JoinToken == "" {
		return domain.Invalid("token", "joining a cluster needs an admin token (--token or JOBFABRIC_TOKEN)")
	}
	body, _ := json.Marshal(api.JoinRequest{ID: s.nodeID, RaftAddr: s.store.Addr(), APIAddr: s.url, Rules: s.fsm.MaxRules()})
	jctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		last = s.fwd.Load().post(jctx, strings.TrimRight(s.cfg.Join, "/")+"/v1/cluster/members", s.cfg.JoinToken, body)
		if last == nil {
			s.log.Info("joined cluster", "via", s.cfg.Join)
			// A state too large to catch up with in time is no reason to
			// stop a member that is in the configuration now: it serves,
			// and forwards answer "unavailable" until it has caught up.
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := s.caughtUp(cctx); err != nil {
				if ctx.Err() != nil {
					return err
				}
				s.log.Warn("serving before catching up with the leader", "err", err)
			}
			return nil
		}
		if c := domain.CodeOf(last); c != domain.CodeUnavailable && c != domain.CodeInternal {
			return fmt.Errorf("join %s: %w", s.cfg.Join, last)
		}
		select {
		case <-jctx.Done():
			return fmt.Errorf("join %s: %w (last error: %v)", s.cfg.Join, jctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
