package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/telemetry"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// logger builds the server's logger from --log-level and --log-format:
// text (slog's key=value lines) or json (one object a line, for log
// shippers).
func logger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, domain.Invalid("log-level", "log-level %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, domain.Invalid("log-format", "log-format %q is not one of text, json", format)
}

func newServerCmd(g *globals) *cobra.Command {
	var cfg server.Config
	var bootstrap bool
	var level, format, secretFile, telemetryFile, healthFile string
	var trusted, raftTrusted []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a jobfabric server (one member of the replicated control plane)",
		Long: `Run a jobfabric server. Without --join it forms (or reopens) a cluster of its
own: a single server needs nothing else, and its raft runs in memory (nothing
listens but the API). To build a 3- or 5-server cluster, give every member the
same --cluster-secret-file (from 'jobfabric cluster secret') or mutual TLS
(--tls-cert, --tls-key, --ca), start the first one with --bootstrap, then the
others with --join URL-OF-ANY-MEMBER and an admin token (--token or
JOBFABRIC_TOKEN). Raft listens (on --raft-addr, default API port + 1000) with
--bootstrap, --join or --raft-addr, and on every restart of a member of a
multi-server cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			var log *slog.Logger
			for name, d := range map[string]time.Duration{"preemption-grace": cfg.PreemptionGrace, "reclaim-backoff": cfg.ReclaimBackoff, "fair-share-half-life": cfg.FairShareHalfLife} {
				if d < time.Second || d > 366*24*time.Hour {
					return domain.Invalid(name, "--%s %s must be between 1s and 366 days", name, d)
				}
			}
			for name, d := range map[string]float64{"scheduler-duty": cfg.SchedulerDuty, "scheduler-quiet-duty": cfg.SchedulerQuietDuty} {
				if !(d > 0 && d <= 1) {
					return domain.Invalid(name, "--%s %g must be greater than 0 and at most 1", name, d)
				}
			}
			if cfg.DeployTimeout < time.Second || cfg.DeployTimeout > time.Hour {
				return domain.Invalid("deploy-timeout", "--deploy-timeout %s must be between 1s and 1h", cfg.DeployTimeout)
			}
			if err := checkRetention(cfg.Retention, cfg.RetainEvery); err != nil {
				return err
			}
			if cfg.Admission.TrustedSources, err = parseSources("api-trusted-sources", trusted); err != nil {
				return err
			}
			if cfg.RaftAdmission.TrustedSources, err = parseSources("raft-trusted-sources", raftTrusted); err != nil {
				return err
			}
			if bootstrap && cfg.Join != "" {
				return domain.Invalid("bootstrap", "--bootstrap forms a new cluster; --join adds to an existing one: give one of them")
			}
			log, err = logger(g.stderr, level, format)
			if err != nil {
				return err
			}
			cfg.Logger, cfg.JoinToken, cfg.TLSCA, cfg.Bootstrap = log, g.bearer(), firstOf(g.ca, os.Getenv("JOBFABRIC_CA")), bootstrap
			cfg.ClusterSecretFile = secretFile
			if cfg.Telemetry, err = loadTelemetryConfig(telemetryFile); err != nil {
				return err
			}
			if healthFile != "" {
				b, err := os.ReadFile(healthFile)
				if err != nil {
					return domain.Invalid("health-config", "--health-config: %v", err)
				}
				hc, err := health.ParseConfig(b)
				if err != nil {
					return fmt.Errorf("--health-config %s: %w", healthFile, err)
				}
				cfg.Health = &hc
			}
			if cfg.FabricDriver == "lab" {
				// The lab's driver lives with the lab; the server takes it
				// as any driver it does not build itself.
				drv, err := labdeploy.Load(cfg.FRRTargets)
				if err != nil {
					return err
				}
				// Repairs FRR 8.4's EVPN next hops between deploys.
				drv.Log = log
				go drv.WatchEVPN(cmd.Context(), labdeploy.WatchInterval)
				cfg.Driver = drv
			}
			// SIGHUP reloads the certificate, key, CA and cluster secret
			// files at once (they are also polled: --reload-interval).
			// Caught from before the start line, so that a SIGHUP sent once
			// it is printed never takes the default action (exit).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			s, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			raft := "in memory (single server: no raft listener)"
			if s.RaftListening() {
				raft = fmt.Sprintf("%s (peers: %s)", s.RaftAddr(), s.PeerAuth())
			}
			fmt.Fprintf(g.stdout, "jobfabric server %s: API %s, raft %s, log store %s\n", s.NodeID(), s.URL(), raft, s.LogStore())
			if tok := s.AdminToken(); tok != "" {
				fmt.Fprintf(g.stdout, "bootstrap admin token (shown once; also in %s):\n  %s\n", filepath.Join(cfg.DataDir, "admin.token"), tok)
			}
			for {
				select {
				case <-hup:
					// The server logs a refusal once; a SIGHUP that meets
					// the same refused file says so again.
					if err := s.Reload(); err != nil {
						log.Warn("SIGHUP: a file was refused; the ones in use are kept", "err", err)
					} else {
						log.Info("SIGHUP: TLS and cluster secret files read; those that changed are in use")
					}
				case <-cmd.Context().Done():
					fmt.Fprintln(g.stdout, "shutting down")
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the raft log, snapshots and node identity (required)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "API listen address")
	f.StringVar(&cfg.LogStore, "log-store", "", "raft log store of a new data directory: wal (raft-wal, one fsync a commit; the default) or bolt (raft-boltdb); a data directory keeps the one it holds, and naming the other fails (docs/operations.md)")
	f.StringVar(&cfg.RaftAddr, "raft-addr", "", "listen for raft peers here (default with --bootstrap or --join: API port + 1000)")
	f.StringVar(&cfg.Advertise, "advertise", "", "API URL other members use to reach this one (default from --listen)")
	f.StringVar(&cfg.NodeID, "node-id", "", "member ID (default: generated once, kept in DATA_DIR/node-id)")
	f.StringVar(&cfg.Join, "join", "", "API URL of a member of an existing cluster to join")
	f.BoolVar(&bootstrap, "bootstrap", false, "form a cluster others will join: raft listens (with peer authentication) from the start; also grows an existing single server")
	f.StringVar(&secretFile, "cluster-secret-file", "", "file holding the cluster secret every member shares (at least 32 random bytes; 'jobfabric cluster secret' makes one): raft peers authenticate with it over TLS 1.3. One secret a line during a rotation: the first issues this member's certificate, every line is accepted from peers (docs/operations.md)")
	f.DurationVar(&cfg.ReloadInterval, "reload-interval", 5*time.Second, "how often --tls-cert, --tls-key, --ca and --cluster-secret-file are read for a change, taken without a restart (SIGHUP reads them at once)")
	f.BoolVar(&cfg.InsecurePeers, "insecure-peers", false, "allow raft to listen without peer authentication: anyone who reaches the raft port can stop writes and rewrite the state (trusted lab networks only)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve the API and raft over TLS with this certificate")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "private key of --tls-cert")
	f.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&format, "log-format", "text", "text (key=value lines) or json (one object a line)")
	f.DurationVar(&cfg.PreemptionGrace, "preemption-grace", 30*time.Second, "how long a preempted job has to stop before its GPUs are released anyway")
	f.DurationVar(&cfg.ReclaimBackoff, "reclaim-backoff", 5*time.Minute, "how long a job reclaimed from borrowed capacity may not borrow again")
	f.DurationVar(&cfg.FairShareHalfLife, "fair-share-half-life", time.Hour, "how fast past usage stops counting in fair share among borrowers")
	f.Float64Var(&cfg.SchedulerDuty, "scheduler-duty", 0.5, "largest share of the leader's wall time spent in scheduling cycles (0 < duty <= 1): after a cycle of d the next waits d x (1/duty - 1), at most the scheduling interval; 1 runs cycles back to back")
	f.Float64Var(&cfg.SchedulerQuietDuty, "scheduler-quiet-duty", 0.1, "the share after a quiet cycle (nothing placed, preempted or released), at most --scheduler-duty: while only submits arrive the next cycle waits d x (1/quiet-duty - 1), at most the scheduling interval; any other change or a due deadline waits the --scheduler-duty gap")
	f.StringVar(&cfg.FabricDriver, "fabric-driver", "file", "deploy device configs with: file (into --fabric-dir), frr (running FRR daemons named in --frr-targets), ssh (FRR on remote Linux switches over SSH, named in --ssh-targets; docs/fabric.md), lab (the namespaces of jobfabric lab up, --frr-targets RUN_DIR/targets.json) or none (no deploy and no network gate)")
	f.DurationVar(&cfg.DeployTimeout, "deploy-timeout", 2*time.Minute, "how long one device's deploy may take (each device has its own; a reload once started runs to its end)")
	f.StringVar(&cfg.FabricDir, "fabric-dir", "", "directory of the file driver (default DATA_DIR/fabric): one directory per device, swapped atomically")
	f.StringVar(&telemetryFile, "telemetry-config", "", "YAML file of exporters to scrape, push sources and series rules (docs/telemetry.md)")
	f.StringVar(&healthFile, "health-config", "", "YAML or JSON file of path health thresholds and debounce (docs/visibility.md; default: the documented defaults)")
	f.StringVar(&cfg.FRRTargets, "frr-targets", "", "JSON file of device -> {vtySocket, confDir, netns, vrfNetns} for the frr and lab drivers")
	f.StringVar(&cfg.SSHTargets, "ssh-targets", "", "JSON file of device -> {address, user, privateKey, knownHosts or hostKey (SHA256 fingerprint), sudo, vtySocket, confDir, netns, vrfNetns} for the ssh driver; host keys are always verified (docs/security.md)")
	cfg.Retention = server.Retention{EndedJobs: 30 * day, EndedJobsPerTenant: 10_000, Events: 90 * day, EventsPerTenant: 100_000, Usage: 400 * day}
	f.Var((*days)(&cfg.Retention.EndedJobs), "retain-ended-jobs", "remove ended jobs this long after they ended (30d, 12h; 0 keeps them); their GPU use stays in the usage archive")
	f.IntVar(&cfg.Retention.EndedJobsPerTenant, "retain-ended-jobs-per-tenant", cfg.Retention.EndedJobsPerTenant, "keep at most this many ended jobs of each tenant, the newest (0: no limit); jobs within the fair-share history stay")
	f.Var((*days)(&cfg.Retention.Events), "retain-events", "remove events this old (0 keeps them)")
	f.IntVar(&cfg.Retention.EventsPerTenant, "retain-events-per-tenant", cfg.Retention.EventsPerTenant, "keep at most this many events of each tenant, and of the cluster's own, the newest (0: no limit)")
	f.Var((*days)(&cfg.Retention.Usage), "retain-usage", "keep the usage archive of removed jobs this long after they ended: usage reports reach this far back (0: forever)")
	f.DurationVar(&cfg.RetainEvery, "retain-every", 10*time.Minute, "how often the leader runs a retention pass")
	cfg.Admission = server.DefaultAdmission()
	f.Float64Var(&cfg.Admission.ConnRate, "api-conn-rate", cfg.Admission.ConnRate, "new API connections a second one source (an IPv4 address, an IPv6 /64) may open on average; over it a connection is closed before the TLS handshake (0: no limit; a site behind one NAT is one source)")
	f.IntVar(&cfg.Admission.ConnBurst, "api-conn-burst", cfg.Admission.ConnBurst, "new API connections one source may open at once")
	f.IntVar(&cfg.Admission.ConnsPerSource, "api-conns-per-source", cfg.Admission.ConnsPerSource, "API connections one source may hold open, streams and idle keep-alive included (0: no limit)")
	f.IntVar(&cfg.Admission.Handshakes, "api-handshakes", cfg.Admission.Handshakes, "TLS handshakes in progress on this server; past it a ClientHello is refused before any key operation (0: no limit)")
	f.IntVar(&cfg.Admission.SourceHandshakes, "api-source-handshakes", cfg.Admission.SourceHandshakes, "TLS handshakes one source may have in progress (0: no limit), so that one source cannot take every --api-handshakes slot")
	f.Float64Var(&cfg.Admission.HandshakeRate, "api-handshake-rate", cfg.Admission.HandshakeRate, "TLS handshakes a second this server begins for all sources but the members and --api-trusted-sources together: the CPU a flood from many addresses may take; during one, new connections from anyone else are refused (0: no limit)")
	f.IntVar(&cfg.Admission.HandshakeBurst, "api-handshake-burst", 1000, "TLS handshakes at once under --api-handshake-rate (clients reconnecting after a leader change)")
	f.IntVar(&cfg.Admission.AuthFailures, "api-auth-failures", cfg.Admission.AuthFailures, "invalid tokens one source may send in --api-auth-window; past it its requests are answered 429 with Retry-After until the window ends (0: no limit)")
	f.DurationVar(&cfg.Admission.AuthWindow, "api-auth-window", cfg.Admission.AuthWindow, "the window of --api-auth-failures")
	f.StringSliceVar(&trusted, "api-trusted-sources", nil, "addresses or CIDR prefixes never limited (a load balancer that limits clients itself, a member forwarding from another address than it advertises); members' advertised addresses always are")
	cfg.RaftAdmission = store.DefaultAdmission()
	f.Float64Var(&cfg.RaftAdmission.ConnRate, "raft-conn-rate", cfg.RaftAdmission.ConnRate, "new Raft connections a second one source that is not a member may open on average; over it a connection is reset before the TLS handshake (0: no limit)")
	f.IntVar(&cfg.RaftAdmission.ConnBurst, "raft-conn-burst", cfg.RaftAdmission.ConnBurst, "new Raft connections one source that is not a member may open at once")
	f.IntVar(&cfg.RaftAdmission.ConnsPerSource, "raft-conns-per-source", cfg.RaftAdmission.ConnsPerSource, "Raft connections one source that is not a member may hold open (0: no limit)")
	f.IntVar(&cfg.RaftAdmission.Handshakes, "raft-handshakes", cfg.RaftAdmission.Handshakes, "Raft TLS handshakes in progress from all sources that are not members together; past it a connection is reset at accept (0: no limit)")
	f.IntVar(&cfg.RaftAdmission.SourceHandshakes, "raft-source-handshakes", cfg.RaftAdmission.SourceHandshakes, "Raft TLS handshakes one source that is not a member may have in progress (0: no limit)")
	f.Float64Var(&cfg.RaftAdmission.HandshakeRate, "raft-handshake-rate", cfg.RaftAdmission.HandshakeRate, "Raft connections a second all sources that are not members together may start a TLS handshake on: the CPU a flood from many addresses may take; during one, every such source is refused, a member whose address is not recognised included (0: no limit)")
	f.IntVar(&cfg.RaftAdmission.HandshakeBurst, "raft-handshake-burst", 100, "Raft handshakes at once under --raft-handshake-rate")
	f.BoolVar(&cfg.RaftAdmission.MembersOnly, "raft-members-only", false, "reset at accept every Raft connection from an address that is neither a member's (the Raft configuration's, names resolved) nor in --raft-trusted-sources; off by default: a member behind NAT or sending from another address than it advertises would be cut off")
	f.StringSliceVar(&raftTrusted, "raft-trusted-sources", nil, "addresses or CIDR prefixes the Raft port never limits (members behind NAT, multi-homed members whose source address is not their advertised Raft address); members' advertised addresses always are")
	_ = cmd.MarkFlagRequired("data-dir")
	cmd.AddCommand(newMigrateLogStoreCmd(g))
	return cmd
}

const day = 24 * time.Hour

func checkRetention(r server.Retention, every time.Duration) error {
	if r.EndedJobsPerTenant < 0 {
		return domain.Invalid("retain-ended-jobs-per-tenant", "--retain-ended-jobs-per-tenant %d is negative (0: no limit)", r.EndedJobsPerTenant)
	}
	if r.EventsPerTenant < 0 {
		return domain.Invalid("retain-events-per-tenant", "--retain-events-per-tenant %d is negative (0: no limit)", r.EventsPerTenant)
	}
	// An archive kept shorter than the jobs would drop a removed job's use
	// at once: reports would lose what the jobs still showed.
	if r.Usage > 0 && r.Usage < r.EndedJobs {
		return domain.Invalid("retain-usage", "--retain-usage %s is shorter than --retain-ended-jobs %s: usage of removed jobs would be lost at once", (*days)(&r.Usage), (*days)(&r.EndedJobs))
	}
	if every < time.Second {
		return domain.Invalid("retain-every", "--retain-every %s is under 1s", every)
	}
	return nil
}

// days is a duration flag that also takes days (30d, 1d12h); 0 is none.
type days time.Duration

func (d *days) String() string {
	v := time.Duration(*d)
	if v > 0 && v%day == 0 {
		return fmt.Sprintf("%dd", v/day)
	}
	return v.String()
}

func (d *days) Set(s string) error {
	var n time.Duration
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		k, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return fmt.Errorf("%q is not a duration (30d, 12h, 1d12h, 0)", s)
		}
		n, rest = time.Duration(k)*day, s[i+1:]
	}
	if rest != "" {
		v, err := time.ParseDuration(rest)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a duration (30d, 12h, 1d12h, 0)", s)
		}
		n += v
	}
	*d = days(n)
	return nil
}

func (*days) Type() string { return "duration" }

// demoOptions sizes the demo cluster.
type demoOptions struct {
	listen, dataDir string
	stripes, sps    int
	// telemetry is the --telemetry-config file ("": none).
	telemetry string
	// feed, when positive, submits a job that often and plays the runtime
	// (reports jobs running, stops preempted ones), so placement, borrowing,
	// reclaim and explanations happen in front of the user.
	feed time.Duration
	// logLevel and logFormat configure the embedded server's log (on
	// stderr): quiet by default, the demo talks through its own output.
	logLevel, logFormat string
}

func newDemoCmd(g *globals) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an embedded single-server jobfabric with a generated demo cluster, tenants and jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), g, o, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7070", "API listen address")
	f.StringVar(&o.dataDir, "data-dir", "", "data directory (default: a temporary one, removed on exit)")
	f.IntVar(&o.stripes, "stripes", 2, "stripes of the demo cluster")
	f.IntVar(&o.sps, "servers-per-stripe", 4, "servers per stripe (8 H100 GPUs each)")
	f.DurationVar(&o.feed, "feed", 5*time.Second, "submit a demo job this often and act as their runtime (0: no stream)")
	f.StringVar(&o.logLevel, "log-level", "error", "the embedded server's log level: debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "the embedded server's log format: text or json")
	f.StringVar(&o.telemetry, "telemetry-config", "", "YAML file of exporters to scrape, push sources and series rules (docs/telemetry.md)")
	return cmd
}

// runDemo starts the server, fills it through the API like a user would,
// prints how to use it and serves until ctx ends. ready, when not nil,
// receives the server URL and admin token once everything is set up.
func runDemo(ctx context.Context, g *globals, o demoOptions, ready func(url, token string)) error {
	if o.stripes < 1 || o.sps < 1 || o.stripes*o.sps < 4 || o.stripes*o.sps > 4096 {
		return domain.Invalid("servers-per-stripe", "the demo needs 4 to 4096 servers (stripes x servers-per-stripe), got %d x %d", o.stripes, o.sps)
	}
	tcfg, err := loadTelemetryConfig(o.telemetry)
	if err != nil {
		return err
	}
	dir := o.dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "jobfabric-demo-")
		if err != nil {
			return fmt.Errorf("create demo data dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	log, err := logger(g.stderr, firstOf(o.logLevel, "error"), firstOf(o.logFormat, "text"))
	if err != nil {
		return err
	}
	s, err := server.Start(ctx, server.Config{DataDir: dir, Listen: o.listen, Logger: log, Telemetry: tcfg})
	if err != nil {
		return err
	}
	defer s.Close()
	token := s.AdminToken()
	if token == "" {
		b, err := os.ReadFile(filepath.Join(dir, "admin.token"))
		if err != nil {
			return fmt.Errorf("existing data dir without admin.token: %w", err)
		}
		token = string(b[:len(b)-1])
	}
	c, err := client.New(s.URL(), token, nil)
	if err != nil {
		return err
	}
	if err := seedDemo(ctx, c, o); err != nil {
		return fmt.Errorf("seed demo: %w", err)
	}
	fmt.Fprintf(g.stdout, `jobfabric demo is running (data in %s).

  API:          %s   (OpenAPI: %s/v1/openapi.json)
  console:      %s/console/   (log in with the admin token)
  admin token:  %s

Try, in another shell:
  export JOBFABRIC_SERVER=%s JOBFABRIC_TOKEN=%s
  go run ./cmd/jobfabric topology show
  go run ./cmd/jobfabric tenant list
  go run ./cmd/jobfabric workspace list acme
  go run ./cmd/jobfabric job list
  go run ./cmd/jobfabric job submit --workspace acme/research --gpus 8 --gpus-per-node 8 --name my-first-job
  go run ./cmd/jobfabric events --since 1h

  go run ./cmd/jobfabric job explain 1
  go run ./cmd/jobfabric job submit --dry-run --workspace globex/inference --gpus 4
  go run ./cmd/jobfabric node list
  go run ./cmd/jobfabric fabric status
  go run ./cmd/jobfabric fabric diff
  ls %s/fabric/        # each leaf's and spine's config, as deployed by the file driver

A job is submitted every %s (research borrows, prod reclaims, globex runs MIG
slices and shares; all with time limits) and the demo plays their runtime.
Press Ctrl-C to stop.
`, dir, s.URL(), s.URL(), s.URL(), token, s.URL(), token, dir, o.feed)
	if ready != nil {
		ready(s.URL(), token)
	}
	if o.feed > 0 {
		feedDemo(ctx, c, o)
	}
	<-ctx.Done()
	return nil
}

// feedDemo submits a stream of jobs with time limits (so they finish by
// themselves) and plays their runtime: Ready jobs are reported running,
// Preempting ones stop a few seconds later. Research borrows big
// preemptible jobs; prod's guaranteed jobs reclaim them; globex runs MIG
// slices and shares. It stops when ctx ends.
func feedDemo(ctx context.Context, c *client.Client, o demoOptions) {
	rng := rand.New(rand.NewPCG(7, 11)) // the same stream every run
	t := time.NewTicker(o.feed)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		jobs, err := c.Jobs(ctx, client.JobQuery{})
		if err != nil {
			continue
		}
		pending := 0
		for _, j := range jobs {
			switch j.State {
			case domain.JobPending:
				pending++
			case domain.JobReady:
				_ = c.Do(ctx, "POST", fmt.Sprintf("/v1/jobs/%d/report", j.ID), map[string]string{"state": "running", "message": "demo runtime started it"}, nil)
			case domain.JobRunning:
				// Demo jobs finish 10s before their time limit.
				if j.StartedAt != nil && time.Since(*j.StartedAt) > time.Duration(j.TimeLimitSeconds-10)*time.Second && j.TimeLimitSeconds > 10 {
					_ = c.Do(ctx, "POST", fmt.Sprintf("/v1/jobs/%d/report", j.ID), map[string]string{"state": "succeeded", "message": "demo job finished"}, nil)
				}
			case domain.JobPreempting:
				if j.StopDeadline != nil && time.Until(*j.StopDeadline) < 25*time.Second {
					_ = c.Do(ctx, "POST", fmt.Sprintf("/v1/jobs/%d/report", j.ID), map[string]string{"state": "stopped", "message": "demo runtime checkpointed and stopped"}, nil)
				}
			}
		}
		if pending >= 6 {
			continue // let the queue drain
		}
		limit := int64(30 + rng.IntN(90))
		var spec domain.JobSpec
		switch n % 4 {
		case 0, 2:
			g := []int{8, 16}[rng.IntN(2)]
			spec = domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: g, GPUsPerNode: 8, Preemptible: true, Name: fmt.Sprintf("train-%d", n)}
		case 1:
			spec = domain.JobSpec{Tenant: "acme", Workspace: "prod", GPUs: 8, GPUsPerNode: 8, Name: fmt.Sprintf("serve-%d", n)}
			limit = 45
		case 3:
			switch rng.IntN(3) {
			case 0:
				spec = domain.JobSpec{Tenant: "globex", Workspace: "inference", MIGProfile: "3g.40gb", MIGCount: 2}
			case 1:
				spec = domain.JobSpec{Tenant: "globex", Workspace: "inference", Share: 0.5}
			default:
				spec = domain.JobSpec{Tenant: "globex", Workspace: "inference", GPUs: 1 + rng.IntN(2)}
			}
			spec.Name = fmt.Sprintf("infer-%d", n)
		}
		spec.TimeLimitSeconds = limit
		_, _ = c.SubmitJob(ctx, spec) // a refused demo job is just skipped
	}
}

func seedDemo(ctx context.Context, c *client.Client, o demoOptions) error {
	t, err := topology.Generate(topology.GenerateOptions{Stripes: o.stripes, ServersPerStripe: o.sps, GPUsPerServer: 8, GPUModel: "H100-80GB"})
	if err != nil {
		return err
	}
	raw, err := jsonBytes(t)
	if err != nil {
		return err
	}
	if _, err := c.ApplyTopology(ctx, raw, false); err != nil {
		return err
	}
	total := o.stripes * o.sps * 8
	tenants := []api.TenantCreateRequest{
		{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true},
		{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware},
	}
	for _, tr := range tenants {
		if _, err := c.CreateTenant(ctx, tr); err != nil && domain.CodeOf(err) != domain.CodeAlreadyExists {
			return err
		}
	}
	one := 1
	ws := []struct {
		tenant string
		req    api.WorkspaceCreateRequest
	}{
		{"acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: total / 4, BorrowLimit: total / 2, LendLimit: total / 4, Weight: &one}},
		{"acme", api.WorkspaceCreateRequest{Name: "prod", Guaranteed: total / 4, LendLimit: total / 8, Weight: &one, Priority: 100}},
		{"globex", api.WorkspaceCreateRequest{Name: "inference", Guaranteed: total / 8, BorrowLimit: total / 8, Weight: &one}},
	}
	created := false
	for _, w := range ws {
		_, err := c.CreateWorkspace(ctx, w.tenant, w.req)
		switch {
		case err == nil:
			created = true
		case domain.CodeOf(err) != domain.CodeAlreadyExists:
			return err
		}
	}
	if !created {
		return nil // an existing demo data dir: its jobs are there already
	}
	jobs := []domain.JobSpec{
		{Name: "llama-pretrain", Tenant: "acme", Workspace: "research", GPUs: 16, GPUsPerNode: 8, GPUModel: "H100-80GB", Preemptible: true},
		{Name: "serving-canary", Tenant: "acme", Workspace: "prod", GPUs: 8, GPUsPerNode: 8, Priority: 10},
		{Name: "embedding-batch", Tenant: "globex", Workspace: "inference", MIGProfile: "3g.40gb", MIGCount: 2},
	}
	for _, j := range jobs {
		if _, err := c.SubmitJob(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// loadTelemetryConfig reads --telemetry-config ("" : no targets, no push
// sources).
func loadTelemetryConfig(path string) (telemetry.Config, error) {
	if path == "" {
		return telemetry.Config{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return telemetry.Config{}, domain.Invalid("telemetry-config", "--telemetry-config: %v", err)
	}
	cfg, err := telemetry.ParseConfig(b)
	if err != nil {
		return telemetry.Config{}, domain.Invalid("telemetry-config", "--telemetry-config %s: %v", path, err)
	}
	return cfg, nil
}

// parseSources reads --api-trusted-sources or --raft-trusted-sources
// (flag): addresses (one host) or CIDR prefixes.
func parseSources(flag string, in []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range in {
		v = strings.TrimSpace(v)
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, domain.Invalid(flag, "--%s %q is neither an address nor a CIDR prefix (10.0.0.5, 10.0.0.0/24, 2001:db8::/64)", flag, v)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func newMigrateLogStoreCmd(g *globals) *cobra.Command {
	var dir, to string
	cmd := &cobra.Command{
		Use:   "migrate-log-store",
		Short: "Move a stopped server's raft log and vote to the other log store (wal or bolt), keeping the old one aside",
		Long: `Copy the raft log and stable keys (term, vote) of a stopped server's data
directory into the log store --to names, check the copy, and swap it in:
raft/raft.db (bolt) or raft/wal/ (wal) becomes the new one and the old one is
renamed *.migrated (remove it once the server runs). Snapshots stay. A running
server holds the store's lock: the command fails instead of waiting. A member
of a cluster is migrated the same way, one member at a time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if dir == "" {
				return domain.Invalid("data-dir", "--data-dir is required")
			}
			if to != store.LogStoreWAL && to != store.LogStoreBolt {
				return domain.Invalid("to", "--to %q is not one of %s, %s", to, store.LogStoreWAL, store.LogStoreBolt)
			}
			log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			m, err := store.MigrateLogStore(cmd.Context(), dir, to, log)
			if errors.Is(err, store.ErrLogStore) {
				return domain.Invalid("to", "%v", err)
			}
			if err != nil {
				return err
			}
			return g.emit(m, func(w io.Writer) {
				fmt.Fprintf(w, "migrated %s to %s: log entries %d to %d; the old store is at %s\n", m.From, m.To, m.First, m.Last, m.Kept)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory of the stopped server (required)")
	f.StringVar(&to, "to", store.LogStoreWAL, "log store to move to: wal or bolt")
	return cmd
}
