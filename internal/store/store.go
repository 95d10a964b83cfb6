package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/fileutil"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

const (
	// maxAppendEntries bounds both the group commit on the leader (how many
	// queued Applies share one log write and fsync) and the entries per
	// AppendEntries RPC. Raft's default: 64 a fsync is 32,000 submits a
	// second at a 2 ms fsync, far above any load we measure. It was 256,
	// and raft sizes a slice of that capacity for every RPC to a follower
	// and every commit it hands the FSM, however few entries they carry
	// (one or two at 1,000 submits a second): 200 of the leader's 930 MB
	// allocated in 30 s (issue 18, docs/benchmarks.md).
	maxAppendEntries = 64
	// logCacheSize keeps the newest entries in memory so that replication to
	// followers that are only slightly behind never reads the disk.
	logCacheSize = 512
	// snapshotsRetained: the newest snapshot plus one to fall back on.
	snapshotsRetained = 2
	// transportTimeout is the I/O deadline of one raft RPC. Generous so that
	// a large InstallSnapshot or a GC pause does not abort replication.
	transportTimeout = 10 * time.Second
	// transportMaxPool is the number of idle outbound connections per peer.
	transportMaxPool = 3
	// snapshotInterval is how often raft checks whether SnapshotThreshold
	// entries were applied since its last snapshot. Raft's 120s (so 120 to
	// 240s between snapshots) let a busy leader log a quarter of a million
	// entries between snapshots, all replayed at a restart (the soak:
	// docs/benchmarks.md); 30s bounds the replay to about a minute of
	// entries plus the threshold, for a snapshot of the retained state.
	snapshotInterval = 30 * time.Second
	// boltOpenTimeout bounds waiting for bolt's file lock: a second process
	// on the same data dir fails fast instead of hanging at start-up.
	boltOpenTimeout = 2 * time.Second
	// probeTimeout bounds AddVoter's check that the new peer is reachable.
	probeTimeout = 5 * time.Second
	// leaderPollInterval paces WaitForLeader.
	leaderPollInterval = 20 * time.Millisecond
)

// Suffrage values reported in Member.
const (
	SuffrageVoter    = "voter"
	SuffrageNonvoter = "nonvoter"
	SuffrageStaging  = "staging"
)

// Peer authentication modes, as reported by Store.PeerAuth.
const (
	// PeerAuthNone: no network transport at all (a single server).
	PeerAuthNone = "none"
	// PeerAuthMTLS: TLS with client certificates verified by the cluster CA.
	PeerAuthMTLS = "mtls"
	// PeerAuthSecret: TLS 1.3 with certificates issued under a CA derived
	// from the cluster secret.
	PeerAuthSecret = "secret"
	// PeerAuthInsecure: the transport listens and trusts any peer
	// (Config.InsecurePeers).
	PeerAuthInsecure = "insecure"
)

// localAddrPrefix marks the address of the in-memory transport of a server
// without a listener; it is what the stored configuration holds for such a
// server until it listens and, as leader, records its network address.
const localAddrPrefix = "inmem:"

// Config configures Open.
type Config struct {
	// NodeID is the stable identity of this server; it must survive
	// restarts, the address may change.
	NodeID string
	// DataDir holds raft state in DataDir/raft: the log and stable store
	// (wal/ or raft.db, see LogStore) and snapshots/.
	DataDir string
	// LogStore chooses the log and stable store of a new data directory:
	// LogStoreWAL (the default) or LogStoreBolt. A data directory that
	// holds one already runs that one; naming the other is refused
	// (ErrLogStore), since raft would start with an empty log.
	LogStore string
	// RaftAddr is the host:port the transport binds when it listens. With
	// port 0 the port the kernel picked is used, and advertised unless
	// AdvertiseAddr is set.
	RaftAddr string
	// Listen opens the network transport at RaftAddr: for the first server
	// of a cluster that will grow, and for one about to join. Without it the
	// transport listens only if the stored configuration has another member;
	// otherwise raft runs over an in-memory transport and nothing listens.
	Listen bool
	// ClusterSecret authenticates peers: see SecretTLS. Exclusive with TLS.
	ClusterSecret []byte
	// AcceptSecrets are further secrets whose peers are accepted while
	// this member's certificate is issued under ClusterSecret: the
	// overlap of a rotation (SecretsTLS). Requires ClusterSecret.
	AcceptSecrets [][]byte
	// InsecurePeers allows a listening transport with neither ClusterSecret
	// nor a TLS client CA: anyone who reaches the port takes part in
	// replication. Tests of that hole and trusted lab networks only.
	InsecurePeers bool
	// AdvertiseAddr is the host:port peers dial; defaults to the bound
	// address, which must then not be unspecified (0.0.0.0 or [::]).
	AdvertiseAddr string
	// Bootstrap makes this node the only voter of a new cluster, but only
	// when DataDir holds no raft state yet: restarts never bootstrap again.
	Bootstrap bool
	// TLS, if set, makes the transport serve TLS. Peers must present a
	// certificate verified by its ClientCAs (ClientAuth is raised to
	// tls.RequireAndVerifyClientCert on a copy); without ClientCAs anyone who
	// can reach the port could take part in replication, so that is refused
	// unless InsecurePeers is set.
	TLS *tls.Config
	// PeerTLS is used to dial peers. When nil it is derived from TLS: its
	// RootCAs (or else ClientCAs) verify peers and its certificates are
	// presented as client certificates. When set without certificates, the
	// certificates of TLS are presented. Requires TLS.
	PeerTLS *tls.Config
	// FSM is the replicated state machine.
	FSM raft.FSM
	// Admission limits, at the listener's accept, what sources that are
	// not members may cost (admission.go). The zero value limits nothing.
	Admission Admission
	// Logger receives the store's logs and raft's; raft's Info and Debug
	// output is logged at Debug, its Trace output below Debug. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// Tuning for tests and benchmarks; zero means raft's defaults, suited to
	// a LAN. A HeartbeatTimeout (or ElectionTimeout) below the defaults
	// pulls the unset smaller timeouts down with it, so setting one value is
	// enough to get a valid configuration.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	// TrailingLogs is how many log entries a snapshot leaves behind for
	// followers that lag (0: raft's 10,240); tests of compaction lower it.
	TrailingLogs uint64
}

// Member is one server of the raft configuration.
type Member struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"` // SuffrageVoter, SuffrageNonvoter or SuffrageStaging
	Leader   bool   `json:"leader"`
}

// Store is a raft server with durable state. It is safe for concurrent use.
type Store struct {
	id       string
	addr     string
	logger   *slog.Logger
	peerAuth string
	clock    tstime.Clock // for the validity checks of a rotation
	// peerMu serialises SetClusterSecrets and SetTLS.
	peerMu    sync.Mutex
	raft      *raft.Raft
	transport raft.Transport
	layer     *streamLayer // nil: in-memory transport, nothing listens
	durable   logStore
	logKind   string // LogStoreWAL or LogStoreBolt

	raftNotify chan bool     // raft's NotifyCh, drained by forwardLeadership
	leaderCh   chan bool     // what LeaderCh hands out
	stop       chan struct{} // closed by Shutdown after raft has stopped
	done       chan struct{} // closed when forwardLeadership returns
	catchUp    chan struct{} // closed when snapshotAfterReplay returns
	trustDone  chan struct{} // closed when the guard's trustLoop returns

	shutdownOnce sync.Once
	shutdownErr  error
}

// Open starts a raft server over the state in cfg.DataDir, bootstrapping a
// single-voter cluster if cfg.Bootstrap is set and there is no state yet.
// It returns without waiting for an election; see WaitForLeader.
func Open(ctx context.Context, cfg Config) (s *Store, err error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("node_id", cfg.NodeID)
	hl := newHCLogAdapter(logger, "raft")

	rc := raftConfig(cfg, hl)
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("store: raft config: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	// Refuse a listener without peer authentication before touching the
	// data dir; a restarted member is checked once its configuration is read.
	var (
		peerAuth           = PeerAuthNone
		serverTLS, dialTLS *tls.Config
	)
	if cfg.Listen {
		if peerAuth, serverTLS, dialTLS, err = peerSecurity(cfg); err != nil {
			return nil, err
		}
	}

	// Undo whatever was opened if a later step fails.
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create raft dir: %w", err)
	}
	kind, err := chooseLogStore(dir, cfg.LogStore)
	if err != nil {
		return nil, err
	}
	durable, err := openLogStore(kind, dir, hl.Named(kind))
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { durable.Close() })
	logs, err := raft.NewLogCache(logCacheSize, durable)
	if err != nil {
		return nil, fmt.Errorf("store: log cache: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, hl.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("store: snapshot store: %w", err)
	}
	snapDir := filepath.Join(dir, "snapshots")
	if err := fileutil.Private(snapDir); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	snaps := privateSnapshots{SnapshotStore: fileSnaps, dir: snapDir, bytesPerSync: snapshotBytesPerSync}

	listen := cfg.Listen
	if !listen {
		stored, err := storedConfiguration(durable, snaps)
		if err != nil {
			return nil, err
		}
		for _, srv := range stored.Servers {
			if string(srv.ID) != cfg.NodeID {
				listen = true // a member of a cluster: its peers dial in
				break
			}
		}
	}

	var (
		transport raft.Transport
		layer     *streamLayer
		advertise string
	)
	if listen && !cfg.Listen {
		if cfg.RaftAddr == "" {
			return nil, errors.New("store: config: the stored configuration has other members, so raft must listen, but RaftAddr is empty")
		}
		if peerAuth, serverTLS, dialTLS, err = peerSecurity(cfg); err != nil {
			return nil, err
		}
	}
	if listen {
		if peerAuth == PeerAuthInsecure {
			logger.Warn("raft peers are NOT authenticated (insecure peers): anyone who reaches the raft port can stop writes and append entries, admin tokens included; use a cluster secret or mutual TLS", "raft_addr", cfg.RaftAddr)
		}
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", cfg.RaftAddr)
		if err != nil {
			return nil, fmt.Errorf("store: listen on %s: %w", cfg.RaftAddr, err)
		}
		cleanup = append(cleanup, func() { ln.Close() })
		advertise = cfg.AdvertiseAddr
		if advertise == "" {
			advertise = ln.Addr().String()
		}
		if err := checkAdvertise(advertise); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		layer = newStreamLayer(ln, advertiseAddr(advertise), serverTLS, dialTLS)
		if a := cfg.Admission; a.ConnRate > 0 || a.ConnsPerSource > 0 || a.Handshakes > 0 || a.SourceHandshakes > 0 || a.HandshakeRate > 0 || a.MembersOnly {
			layer.guard = newGuard(a, serverTLS != nil, logger)
		}
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  layer,
			MaxPool: transportMaxPool,
			Timeout: transportTimeout,
			Logger:  hl.Named("transport"),
		})
		transport = nt
		cleanup = append(cleanup, func() { nt.Close(); layer.Close() })
	} else {
		// No peers and none expected: raft talks to nobody, so nothing
		// needs to listen. The address only names this server in the
		// configuration until it listens (see fixSelfAddr).
		addr, it := raft.NewInmemTransport(raft.ServerAddress(localAddrPrefix + cfg.NodeID))
		transport, advertise = it, string(addr)
		cleanup = append(cleanup, func() { it.Close() })
		if cfg.InsecurePeers {
			logger.Info("insecure peers allowed but unused: a single server has no raft listener")
		}
	}

	existing, err := raft.HasExistingState(logs, durable, snaps)
	if err != nil {
		return nil, fmt.Errorf("store: inspect raft state: %w", err)
	}

	raftNotify := make(chan bool, 16)
	rc.NotifyCh = raftNotify
	r, err := raft.NewRaft(rc, cfg.FSM, logs, durable, snaps, transport)
	if err != nil {
		return nil, fmt.Errorf("store: start raft: %w", err)
	}
	cleanup = append(cleanup, func() { r.Shutdown().Error() })

	if cfg.Bootstrap && !existing {
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       rc.LocalID,
			Address:  transport.LocalAddr(),
		}}}
		if err := await(ctx, nil, func() error { return r.BootstrapCluster(conf).Error() }); err != nil {
			return nil, fmt.Errorf("store: bootstrap: %w", err)
		}
		logger.Info("raft cluster bootstrapped", "addr", advertise)
	}

	s = &Store{
		id:         cfg.NodeID,
		addr:       advertise,
		peerAuth:   peerAuth,
		clock:      clockOf(cfg.Admission),
		logger:     logger,
		raft:       r,
		transport:  transport,
		layer:      layer,
		durable:    durable,
		logKind:    kind,
		raftNotify: raftNotify,
		leaderCh:   make(chan bool, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		catchUp:    make(chan struct{}),
		trustDone:  make(chan struct{}),
	}
	go s.forwardLeadership()
	if layer != nil && layer.guard != nil {
		layer.guard.refresh(r, s.stop) // members trusted before Open returns
	}
	go func() {
		defer close(s.trustDone)
		if layer != nil && layer.guard != nil {
			layer.guard.trustLoop(r, s.stop)
		}
	}()
	go s.snapshotAfterReplay(rc.SnapshotThreshold)
	logger.Info("raft store opened", "addr", advertise, "existing_state", existing, "peer_auth", peerAuth, "log_store", kind)
	return s, nil
}

func validate(cfg Config) error {
	switch {
	case cfg.NodeID == "":
		return errors.New("store: config: NodeID is required")
	case cfg.DataDir == "":
		return errors.New("store: config: DataDir is required")
	case cfg.Listen && cfg.RaftAddr == "":
		return errors.New("store: config: RaftAddr is required to listen")
	case cfg.FSM == nil:
		return errors.New("store: config: FSM is required")
	case cfg.PeerTLS != nil && cfg.TLS == nil:
		return errors.New("store: config: PeerTLS requires TLS: peers dial each other the way they serve")
	case cfg.ClusterSecret != nil && cfg.TLS != nil:
		return errors.New("store: config: ClusterSecret and TLS both authenticate peers: give one")
	case len(cfg.AcceptSecrets) > 0 && cfg.ClusterSecret == nil:
		return errors.New("store: config: AcceptSecrets requires ClusterSecret, the secret this member issues under")
	}
	switch cfg.LogStore {
	case "", LogStoreWAL, LogStoreBolt:
	default:
		return fmt.Errorf("%w: %q is not one of %s, %s", ErrLogStore, cfg.LogStore, LogStoreWAL, LogStoreBolt)
	}
	if err := cfg.Admission.Check(); err != nil {
		return fmt.Errorf("store: config: admission: %w", err)
	}
	if cfg.AdvertiseAddr != "" {
		if err := checkAdvertise(cfg.AdvertiseAddr); err != nil {
			return fmt.Errorf("store: config: %w", err)
		}
	}
	return nil
}

func raftConfig(cfg Config, hl *hclogAdapter) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hl
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = maxAppendEntries
	rc.NoSnapshotRestoreOnStart = false
	rc.NoLegacyTelemetry = true

	// Keep the invariants raft validates (lease <= heartbeat <= election)
	// when only some timeouts are given.
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	} else if cfg.ElectionTimeout > 0 && cfg.ElectionTimeout < rc.HeartbeatTimeout {
		rc.HeartbeatTimeout = cfg.ElectionTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	} else if rc.HeartbeatTimeout > rc.ElectionTimeout {
		rc.ElectionTimeout = rc.HeartbeatTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	} else if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.SnapshotInterval = snapshotInterval
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	return rc
}

// ErrUnauthenticatedPeers is returned by Open when the transport would
// listen without a way to authenticate peers and InsecurePeers is not set.
var ErrUnauthenticatedPeers = errors.New("store: raft peers would not be authenticated")

// peerSecurity chooses how a listening transport authenticates peers.
func peerSecurity(cfg Config) (auth string, serverTLS, dialTLS *tls.Config, err error) {
	switch {
	case cfg.ClusterSecret != nil:
		serverTLS, dialTLS, err = SecretsTLS(cfg.ClusterSecret, cfg.AcceptSecrets...)
		if err != nil {
			return "", nil, nil, fmt.Errorf("store: cluster secret: %w", err)
		}
		return PeerAuthSecret, serverTLS, dialTLS, nil
	case cfg.TLS != nil && cfg.TLS.ClientCAs != nil:
		serverTLS, dialTLS, err = transportTLS(cfg.TLS, cfg.PeerTLS)
		return PeerAuthMTLS, serverTLS, dialTLS, err
	case !cfg.InsecurePeers:
		if cfg.TLS != nil {
			return "", nil, nil, fmt.Errorf("%w: TLS has no client CA to verify peers with; give a CA, a cluster secret or allow insecure peers", ErrUnauthenticatedPeers)
		}
		return "", nil, nil, fmt.Errorf("%w: give a cluster secret or TLS with a client CA, or allow insecure peers", ErrUnauthenticatedPeers)
	case cfg.TLS != nil:
		// Encrypted, but anyone may connect.
		serverTLS, dialTLS, err = transportTLS(cfg.TLS, cfg.PeerTLS)
		return PeerAuthInsecure, serverTLS, dialTLS, err
	default:
		return PeerAuthInsecure, nil, nil, nil
	}
}

func clockOf(a Admission) tstime.Clock {
	if a.Clock != nil {
		return a.Clock
	}
	return tstime.Std{}
}

// ErrWrongPeerAuth is returned by SetClusterSecrets and SetTLS when the
// store authenticates its peers the other way: a rotation does not switch
// between a cluster secret and mutual TLS (that needs a restart).
var ErrWrongPeerAuth = errors.New("store: peers are authenticated another way")

// SetClusterSecrets rotates the cluster secret of a running member: the
// next handshakes present a new certificate issued under issue and accept
// peers under issue or any of accept (SecretsTLS). Open connections go on,
// except those whose peer is no longer accepted (its secret dropped). A
// store that does not listen has nothing to change.
func (s *Store) SetClusterSecrets(issue []byte, accept [][]byte) error {
	if s.layer == nil {
		return nil
	}
	if s.peerAuth != PeerAuthSecret {
		return fmt.Errorf("%w: by %s, not a cluster secret", ErrWrongPeerAuth, s.peerAuth)
	}
	serverTLS, dialTLS, err := SecretsTLS(issue, accept...)
	if err != nil {
		return fmt.Errorf("store: cluster secret: %w", err)
	}
	s.peerMu.Lock()
	defer s.peerMu.Unlock()
	dropped := s.layer.setTLS(serverTLS, dialTLS, s.clock.Now())
	s.logger.Info("raft cluster secret rotated", "accepted_secrets", 1+len(accept), "connections_closed", dropped)
	return nil
}

// SetTLS rotates the certificate and CAs of a member whose peers use
// mutual TLS (or TLS with insecure peers): cfg and peer as Config.TLS and
// Config.PeerTLS. Open connections go on, except those whose peer the new
// CAs no longer verify.
func (s *Store) SetTLS(cfg, peer *tls.Config) error {
	if s.layer == nil {
		return nil
	}
	if cur := s.layer.tls.Load(); s.peerAuth != PeerAuthMTLS && (s.peerAuth != PeerAuthInsecure || cur.server == nil) {
		return fmt.Errorf("%w: by %s, not TLS certificates", ErrWrongPeerAuth, s.peerAuth)
	}
	if s.peerAuth == PeerAuthMTLS && (cfg == nil || cfg.ClientCAs == nil) {
		return errors.New("store: a rotation must keep a client CA: peers would no longer be authenticated")
	}
	serverTLS, dialTLS, err := transportTLS(cfg, peer)
	if err != nil {
		return err
	}
	s.peerMu.Lock()
	defer s.peerMu.Unlock()
	dropped := s.layer.setTLS(serverTLS, dialTLS, s.clock.Now())
	s.logger.Info("raft TLS rotated", "connections_closed", dropped)
	return nil
}

// PeerCertificate is the certificate this member presents to its peers
// now; nil when raft does not listen or runs without TLS.
func (s *Store) PeerCertificate() *x509.Certificate {
	if s.layer == nil {
		return nil
	}
	cfg := s.layer.tls.Load().server
	if cfg == nil || len(cfg.Certificates) == 0 {
		return nil
	}
	c := cfg.Certificates[0]
	if c.Leaf != nil {
		return c.Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// transportTLS derives the listener and dialer configs; see Config.TLS and
// Config.PeerTLS. Both are copies: the caller's configs are not modified.
func transportTLS(srv, peer *tls.Config) (serverTLS, dialTLS *tls.Config, err error) {
	serverTLS = srv.Clone()
	if serverTLS.MinVersion < tls.VersionTLS12 {
		serverTLS.MinVersion = tls.VersionTLS12
	}
	if serverTLS.ClientCAs != nil {
		serverTLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if peer != nil {
		dialTLS = peer.Clone()
	} else {
		dialTLS = &tls.Config{RootCAs: serverTLS.RootCAs}
		if dialTLS.RootCAs == nil {
			dialTLS.RootCAs = serverTLS.ClientCAs // nil still: the system pool
		}
	}
	if dialTLS.MinVersion < tls.VersionTLS12 {
		dialTLS.MinVersion = tls.VersionTLS12
	}
	if len(dialTLS.Certificates) == 0 && dialTLS.GetClientCertificate == nil {
		dialTLS.Certificates = serverTLS.Certificates
	}
	if serverTLS.ClientAuth == tls.RequireAndVerifyClientCert && len(dialTLS.Certificates) == 0 && dialTLS.GetClientCertificate == nil {
		return nil, nil, errors.New("store: config: raft peers must present a client certificate but neither PeerTLS nor TLS has one")
	}
	return serverTLS, dialTLS, nil
}

// storedConfiguration returns the newest cluster configuration in the log
// or, failing that, in the newest snapshot: the one raft will start with.
// The log is read backwards because configuration entries are rare and
// the newest one wins.
func storedConfiguration(logs raft.LogStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
	var conf raft.Configuration
	var snapIndex uint64
	metas, err := snaps.List()
	if err != nil {
		return conf, fmt.Errorf("store: list snapshots: %w", err)
	}
	if len(metas) > 0 {
		conf, snapIndex = metas[0].Configuration, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return conf, fmt.Errorf("store: read log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return conf, fmt.Errorf("store: read log: %w", err)
	}
	for i := last; i >= first && i > snapIndex && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return conf, fmt.Errorf("store: read log entry %d: %w", i, err)
		}
		if l.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(l.Data), nil
		}
	}
	return conf, nil
}

// snapshotAfterReplay snapshots once the log found at the start is
// applied, if it holds threshold entries or more beyond the newest
// snapshot. Raft checks the threshold on a timer (snapshotInterval) that
// starts with the process, so a server restarted more often than that (a
// crash loop, an operator's restarts, the soak's samples) never snapshots:
// its log, and the replay at each restart, grew with every restart
// (docs/benchmarks.md, the soak).
func (s *Store) snapshotAfterReplay(threshold uint64) {
	defer close(s.catchUp)
	last := s.raft.LastIndex()
	snap, err := strconv.ParseUint(s.raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil || last < snap+threshold {
		return
	}
	t := time.NewTicker(leaderPollInterval)
	defer t.Stop()
	applied := func() bool {
		// min: a follower's unreplicated tail, overwritten by a new
		// leader with a shorter log, is never applied.
		if s.raft.AppliedIndex() < min(last, s.raft.LastIndex()) {
			return false
		}
		// AppliedIndex counts the entries handed to the FSM's queue: a
		// snapshot taken before the FSM drained it covers only part of
		// the log (the soak saw one at 1,281 of 8,658 entries).
		return s.raft.Stats()["fsm_pending"] == "0"
	}
	for !applied() {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
	start := time.Now()
	err = s.await(context.Background(), func() error { return s.raft.Snapshot().Error() })
	switch {
	case err == nil:
		s.logger.Info("snapshot after replaying the log found at the start", "entries", last-snap, "took", time.Since(start))
	case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown), s.stopped():
	default:
		s.logger.Warn("snapshot after replaying the log found at the start", "entries", last-snap, "err", err)
	}
}

// forwardLeadership drains raft's NotifyCh at once, because raft blocks on
// it, and keeps only the newest value in leaderCh for a consumer that may be
// slow or absent. It closes leaderCh after Shutdown.
func (s *Store) forwardLeadership() {
	defer close(s.done)
	defer close(s.leaderCh)
	for {
		select {
		case v := <-s.raftNotify:
			s.publishLeadership(v)
		case <-s.stop:
			// Raft has stopped: flush what it sent on the way out.
			for {
				select {
				case v := <-s.raftNotify:
					s.publishLeadership(v)
				default:
					return
				}
			}
		}
	}
}

func (s *Store) publishLeadership(v bool) {
	if v {
		s.logger.Info("raft leadership acquired")
		if s.layer != nil {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), transportTimeout)
				defer cancel()
				if err := s.fixSelfAddr(ctx); err != nil {
					s.logger.Warn("record this server's raft address", "err", err)
				}
			}()
		}
	} else {
		s.logger.Info("raft leadership lost")
	}
	for {
		select {
		case s.leaderCh <- v:
			return
		default:
		}
		// Full: replace the stale value. Only this goroutine sends, so the
		// next send finds room.
		select {
		case <-s.leaderCh:
		default:
		}
	}
}

// Apply proposes cmd and waits until it is committed and applied by the
// local FSM, returning the FSM's response as is (an FSM that reports
// rejections as error values returns them here, with a nil error).
//
// ctx bounds the whole call. Not on the leader, it returns *NotLeaderError
// and the command was not appended: retrying on the leader is safe. An error
// wrapping ErrUnknownOutcome (leadership lost, shutdown, or ctx ended while
// the command was in flight) means it may still commit. After Shutdown the
// error wraps raft.ErrRaftShutdown.
func (s *Store) Apply(ctx context.Context, cmd []byte) (any, error) {
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: apply: %w", err)
	}
	if s.stopped() {
		return nil, fmt.Errorf("store: apply: %w", raft.ErrRaftShutdown)
	}
	var resp any
	err = s.await(ctx, func() error {
		f := s.raft.Apply(cmd, timeout)
		if err := f.Error(); err != nil {
			return err
		}
		resp = f.Response()
		return nil
	})
	if err != nil {
		return nil, s.wrap("apply", err, true)
	}
	return resp, nil
}

// IsLeader reports whether this server is the leader now. It can be stale
// the moment it returns; use Barrier to confirm leadership for a read.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the leader known to this server, or empty strings.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitForLeader returns once this server knows a leader (itself or a peer).
func (s *Store) WaitForLeader(ctx context.Context) error {
	t := time.NewTicker(leaderPollInterval)
	defer t.Stop()
	for {
		if id, _ := s.Leader(); id != "" {
			return nil
		}
		if s.raft.State() == raft.Shutdown {
			return fmt.Errorf("store: wait for leader: %w", raft.ErrRaftShutdown)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: wait for leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// AddVoter adds or updates server id at addr as a voter and waits until the
// change is committed. Leader only. It is a no-op when id is already a voter
// at addr. Another server registered at addr is an error: remove it first,
// since two IDs at one address would both count towards the quorum.
func (s *Store) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return errors.New("store: add voter: id and addr are required")
	}
	if s.layer == nil {
		return fmt.Errorf("store: add voter %q: %w", id, ErrNoListener)
	}
	if !s.IsLeader() {
		return s.notLeader()
	}
	// A new member must learn where this leader listens, not the address
	// of the transport it ran on before it listened.
	if err := s.fixSelfAddr(ctx); err != nil {
		return fmt.Errorf("store: add voter %q: %w", id, err)
	}
	servers, err := s.configuration()
	if err != nil {
		return fmt.Errorf("store: add voter: %w", err)
	}
	for _, srv := range servers {
		if string(srv.ID) == id && string(srv.Address) == addr && srv.Suffrage == raft.Voter {
			return nil
		}
		if string(srv.ID) != id && string(srv.Address) == addr {
			return fmt.Errorf("store: add voter %q: address %s is used by server %q; remove it first", id, addr, srv.ID)
		}
	}
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return fmt.Errorf("store: add voter: %w", err)
	}
	pt := probeTimeout
	if timeout > 0 && timeout < pt {
		pt = timeout
	}
	if err := s.layer.probe(addr, pt); err != nil {
		return fmt.Errorf("store: add voter %q: %w at %s (same cluster secret or CA on both?): %w", id, ErrPeerUnreachable, addr, err)
	}
	err = s.await(ctx, func() error {
		return s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error()
	})
	if err != nil {
		return s.wrap("add voter", err, true)
	}
	s.logger.Info("raft voter added", "voter_id", id, "voter_addr", addr)
	return nil
}

// fixSelfAddr makes the configuration name this leader at the address it
// listens on. A server that ran alone (in-memory transport) or at another
// address and restarted listening is still recorded at the old address,
// which peers could not dial once they join. Leader only; a no-op when the
// address is right or the store does not listen.
func (s *Store) fixSelfAddr(ctx context.Context) error {
	if s.layer == nil || !s.IsLeader() {
		return nil
	}
	servers, err := s.configuration()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if string(srv.ID) != s.id || string(srv.Address) == s.addr {
			continue
		}
		if srv.Suffrage != raft.Voter {
			return nil // raft's leaders are voters; nothing to fix here
		}
		timeout, err := enqueueTimeout(ctx)
		if err != nil {
			return err
		}
		err = s.await(ctx, func() error {
			return s.raft.AddVoter(raft.ServerID(s.id), raft.ServerAddress(s.addr), 0, timeout).Error()
		})
		if err != nil {
			return s.wrap("record own address", err, true)
		}
		s.logger.Info("raft address of this server updated in the configuration", "old_addr", srv.Address, "addr", s.addr)
	}
	return nil
}

// RemoveServer removes server id from the cluster and waits until the change
// is committed. Leader only; a no-op when id is not a member. A leader that
// removes itself steps down once the change is committed.
func (s *Store) RemoveServer(ctx context.Context, id string) error {
	if !s.IsLeader() {
		return s.notLeader()
	}
	servers, err := s.configuration()
	if err != nil {
		return fmt.Errorf("store: remove server: %w", err)
	}
	found := false
	for _, srv := range servers {
		if string(srv.ID) == id {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return fmt.Errorf("store: remove server: %w", err)
	}
	err = s.await(ctx, func() error {
		return s.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error()
	})
	if err != nil {
		return s.wrap("remove server", err, true)
	}
	s.logger.Info("raft server removed", "server_id", id)
	return nil
}

// Members returns the latest raft configuration as known by this server
// (on a follower it may lag behind the leader's).
func (s *Store) Members() ([]Member, error) {
	servers, err := s.configuration()
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	leaderID, _ := s.Leader()
	out := make([]Member, 0, len(servers))
	for _, srv := range servers {
		out = append(out, Member{
			ID:       string(srv.ID),
			Addr:     string(srv.Address),
			Suffrage: suffrage(srv.Suffrage),
			Leader:   leaderID != "" && string(srv.ID) == leaderID,
		})
	}
	return out, nil
}

func suffrage(sf raft.ServerSuffrage) string {
	switch sf {
	case raft.Voter:
		return SuffrageVoter
	case raft.Nonvoter:
		return SuffrageNonvoter
	case raft.Staging:
		return SuffrageStaging
	default:
		return sf.String()
	}
}

// configuration does not block: raft answers it from a cached copy.
func (s *Store) configuration() ([]raft.Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// Barrier commits a no-op and waits until the FSM has applied everything
// before it. On return this server was the leader after the call began and
// its FSM reflects every write acknowledged before then: reads that follow
// are linearizable. Leader only.
func (s *Store) Barrier(ctx context.Context) error {
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return fmt.Errorf("store: barrier: %w", err)
	}
	if s.stopped() {
		return fmt.Errorf("store: barrier: %w", raft.ErrRaftShutdown)
	}
	if err := s.await(ctx, func() error { return s.raft.Barrier(timeout).Error() }); err != nil {
		return s.wrap("barrier", err, false)
	}
	return nil
}

// CommitIndex is the newest log index this server knows committed. A new
// leader may not have applied all of it yet.
func (s *Store) CommitIndex() uint64 { return s.raft.CommitIndex() }

// LeaderCh delivers true when this server becomes leader and false when it
// stops being leader. Only the newest value is kept, so a slow reader sees
// the current state rather than every transition; use one reader. It is
// closed after Shutdown.
func (s *Store) LeaderCh() <-chan bool { return s.leaderCh }

// Snapshot makes raft snapshot the FSM now and compact the log. Having
// nothing new to snapshot is not an error.
func (s *Store) Snapshot(ctx context.Context) error {
	err := s.await(ctx, func() error { return s.raft.Snapshot().Error() })
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	if err != nil {
		return s.wrap("snapshot", err, false)
	}
	return nil
}

// Addr returns the advertised raft address; for a store that does not
// listen, the name of its in-memory transport.
func (s *Store) Addr() string { return s.addr }

// Listening reports whether the raft transport is reachable over the
// network.
func (s *Store) Listening() bool { return s.layer != nil }

// PeerAuth reports how peers are authenticated: PeerAuthNone (no listener),
// PeerAuthMTLS, PeerAuthSecret or PeerAuthInsecure.
func (s *Store) PeerAuth() string { return s.peerAuth }

// LogStore reports the log store this server runs: LogStoreWAL or
// LogStoreBolt.
func (s *Store) LogStore() string { return s.logKind }

// ID returns this server's node ID.
func (s *Store) ID() string { return s.id }

// Shutdown stops raft, closes the transport with its connections and the
// log store. It does not leave the cluster: a restarted server resumes its
// membership. Safe to call more than once; later calls return the first
// call's result.
func (s *Store) Shutdown() error {
	s.shutdownOnce.Do(func() {
		var errs []error
		// raft.Shutdown waits for raft's goroutines, FSM and snapshots
		// included, so nothing touches the log store or the FSM afterwards.
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
		if c, ok := s.transport.(raft.WithClose); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("transport: %w", err))
			}
		}
		if s.layer != nil {
			if err := s.layer.Close(); err != nil {
				errs = append(errs, fmt.Errorf("listener: %w", err))
			}
		}
		if nt, ok := s.transport.(*raft.NetworkTransport); ok {
			nt.CloseStreams() // pooled outbound connections
		}
		close(s.stop)
		<-s.done
		<-s.catchUp
		<-s.trustDone
		if err := s.durable.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s log store: %w", s.logKind, err))
		}
		if err := errors.Join(errs...); err != nil {
			s.shutdownErr = fmt.Errorf("store: shutdown: %w", err)
		}
		s.logger.Info("raft store shut down")
	})
	return s.shutdownErr
}

func (s *Store) notLeader() error {
	id, addr := s.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// wrap turns raft's errors into the store's: *NotLeaderError, or a wrapped
// error that keeps raft's sentinel for errors.Is. mutation marks operations
// whose effect is unknown when they fail in flight.
func (s *Store) wrap(op string, err error, mutation bool) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return s.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		// The deadline came from ctx; report it as such.
		return fmt.Errorf("store: %s: %w: %w", op, context.DeadlineExceeded, err)
	case mutation && (errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrRaftShutdown) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)):
		return fmt.Errorf("store: %s: %w: %w", op, ErrUnknownOutcome, err)
	default:
		return fmt.Errorf("store: %s: %w", op, err)
	}
}

// enqueueTimeout converts ctx's deadline into raft's enqueue timeout; zero
// means none.
func enqueueTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(deadline)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// await runs a blocking raft call and returns early when ctx ends or the
// store has shut down. Raft's futures cannot be cancelled, so the call
// finishes in the background; raft resolves every future eventually
// (commit, leadership loss or shutdown) except one left in the buffered
// apply channel when raft stops, whose goroutine stays blocked: at most
// maxAppendEntries of them per Store, only after Shutdown.
func await(ctx context.Context, stop <-chan struct{}, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

func (s *Store) await(ctx context.Context, fn func() error) error {
	return await(ctx, s.stop, fn)
}

// stopped reports whether Shutdown has stopped raft. Checked before
// proposing, because with BatchApplyCh a proposal to a stopped raft lands in
// a channel buffer nobody drains and would never be answered.
func (s *Store) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}
