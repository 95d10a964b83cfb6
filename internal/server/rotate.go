package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
)

// defaultReloadInterval is how often the certificate, key, CA and cluster
// secret files are read for a change: cert-manager and kubelet rewrite a
// mounted secret within a minute, and reading four small files costs
// nothing.
const defaultReloadInterval = 5 * time.Second

// rotation keeps the server's TLS material and cluster secret current
// with their files (Reload: SIGHUP; reloadLoop: a poll), without a
// restart: the API listener, the raft listener and dialer, and the
// forwarder take the new ones for their next handshakes.
type rotation struct {
	tls        *tlsutil.Reloader // nil: no --tls-cert
	secretPath string            // "": no --cluster-secret-file
	log        *slog.Logger
	clock      Clock

	mu sync.Mutex // serialises secret reloads; guards the fields below
	// secretTried is the content last tried, secretInUse the content in
	// use: the same refused file is not tried (nor logged) again, but
	// secretRefused, its refusal, is returned again (a SIGHUP meeting it
	// is no success).
	secretTried, secretInUse [sha256.Size]byte
	secretRefused            error
	secret                   api.SecretStatus
}

// atomicForwarder holds the forwarder of the CA in use.
type atomicForwarder struct{ atomic.Pointer[forwarder] }

// tlsChanged hands a new certificate and CA bundle to raft (with mutual
// TLS; a cluster secret has its own) and to the forwarder; the API
// listener reads the Reloader at each handshake.
func (s *Server) tlsChanged(b *tlsutil.Bundle) {
	if s.store.PeerAuth() == store.PeerAuthMTLS || s.store.PeerAuth() == store.PeerAuthInsecure && s.cfg.ClusterSecret == nil && s.rot.secretPath == "" {
		if err := s.store.SetTLS(b.ServerTLS(), nil); err != nil {
			s.rot.log.Error("raft kept its certificate: the new one was refused", "err", err)
		}
	}
	old := s.fwd.Swap(newForwarder(b.ClientTLS("")))
	// Requests in flight finish on the old connections; idle ones go,
	// so the next request verifies the leader with the new CA.
	old.client.Transport.(*http.Transport).CloseIdleConnections()
}

// secrets is one reading of --cluster-secret-file.
type secrets struct {
	issue  []byte
	accept [][]byte
}

// readSecrets reads a cluster secret file: one secret a line (blank lines
// and lines starting with # skipped); the first issues this member's raft
// certificate, every one is accepted from peers. Each must pass
// store.ValidateSecret.
func readSecrets(path string) (secrets, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return secrets{}, nil, domain.Invalid("cluster-secret-file", "--cluster-secret-file: %v", err)
	}
	var s secrets
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 0; sc.Scan(); {
		line++
		v := bytes.TrimSpace(sc.Bytes())
		if len(v) == 0 || v[0] == '#' || seen[string(v)] {
			continue
		}
		seen[string(v)] = true
		if err := store.ValidateSecret(v); err != nil {
			return secrets{}, nil, domain.Invalid("cluster-secret-file", "--cluster-secret-file %s line %d: %v; generate one with `jobfabric cluster secret`", path, line, err)
		}
		if s.issue == nil {
			s.issue = bytes.Clone(v)
		} else {
			s.accept = append(s.accept, bytes.Clone(v))
		}
	}
	if err := sc.Err(); err != nil {
		return secrets{}, nil, domain.Invalid("cluster-secret-file", "--cluster-secret-file %s: %v", path, err)
	}
	if s.issue == nil {
		return secrets{}, nil, domain.Invalid("cluster-secret-file", "--cluster-secret-file %s holds no secret (one a line; generate one with `jobfabric cluster secret`)", path)
	}
	return s, b, nil
}

// secretStatus describes s without revealing it: fingerprints of the CAs
// the secrets derive, which members at the same step share.
func secretStatus(s secrets) api.SecretStatus {
	st := api.SecretStatus{Issuing: store.SecretFingerprint(s.issue)}
	for _, a := range s.accept {
		st.Accepted = append(st.Accepted, store.SecretFingerprint(a))
	}
	return st
}

// tlsFlag names the flag behind a refused TLS file.
func tlsFlag(err error) string {
	var fe *tlsutil.FileError
	if errors.As(err, &fe) {
		switch fe.Kind {
		case "key":
			return "tls-key"
		case "ca":
			return "ca"
		}
	}
	return "tls-cert"
}

// Reload reads the certificate, key, CA and cluster secret files now (what
// SIGHUP does) and takes those that changed and pass their checks; a
// refused file is logged and reported, and the one in use kept.
func (s *Server) Reload() error {
	var errs []error
	if s.rot.tls != nil {
		if _, err := s.rot.tls.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.reloadSecret(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// reloadSecret takes a changed --cluster-secret-file.
func (s *Server) reloadSecret() error {
	r := &s.rot
	if r.secretPath == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sec, raw, err := readSecrets(r.secretPath)
	if err == nil {
		sum := sha256.Sum256(raw)
		if sum == r.secretTried {
			return r.secretRefused // the same content: said so already
		}
		r.secretTried, r.secretRefused = sum, nil
		if sum == r.secretInUse {
			r.secret.LastError, r.secret.LastErrorAt = "", time.Time{}
			return nil
		}
		if err = s.store.SetClusterSecrets(sec.issue, sec.accept); err == nil {
			r.secretInUse = sum
			st := secretStatus(sec)
			st.Reloads, st.Errors, st.LoadedAt = r.secret.Reloads+1, r.secret.Errors, r.clock.Now()
			r.secret = st
			r.log.Info("cluster secret reloaded", "file", r.secretPath, "issuing", st.Issuing, "accepted", st.Accepted)
			return nil
		}
	} else if r.secret.LastError == err.Error() {
		return err // said so already
	} else {
		r.secretTried = [sha256.Size]byte{} // readable again later: try it
	}
	r.secretRefused = err
	r.secret.LastError, r.secret.LastErrorAt = err.Error(), r.clock.Now()
	r.secret.Errors++
	r.log.Error("cluster secret reload refused; the secrets in use are kept", "file", r.secretPath, "err", err, "issuing_in_use", r.secret.Issuing)
	return err
}

// reloadLoop polls the files every interval until ctx ends.
func (s *Server) reloadLoop(ctx context.Context, every time.Duration) {
	if s.rot.tls == nil && s.rot.secretPath == "" {
		return
	}
	tk, c := s.clock.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			s.Reload()
		}
	}
}

// TLSStatus is this member's certificates and cluster secret in use, and
// the last refused reload of each.
func (s *Server) TLSStatus() api.TLSStatus {
	st := api.TLSStatus{Node: s.nodeID, PeerAuth: s.store.PeerAuth()}
	if s.rot.tls != nil {
		t := s.rot.tls.Status()
		st.API = &api.CertStatus{Cert: s.rot.tls.Files().Cert, CA: s.rot.tls.Files().CA, Serial: t.Info.Serial, Subject: t.Info.Subject,
			NotBefore: t.Info.NotBefore, NotAfter: t.Info.NotAfter, CAs: t.Info.CAs, LoadedAt: t.Info.LoadedAt,
			Reloads: t.Reloads, Errors: t.Errors, LastError: t.LastError, LastErrorAt: t.LastErrorAt}
	}
	if c := s.store.PeerCertificate(); c != nil {
		st.RaftSerial, st.RaftNotAfter = fmt.Sprintf("%x", c.SerialNumber), c.NotAfter
	}
	if s.rot.secretPath != "" {
		s.rot.mu.Lock()
		sec := s.rot.secret
		s.rot.mu.Unlock()
		sec.File = s.rot.secretPath
		st.Secret = &sec
	}
	return st
}

func (s *Server) tlsStatus(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.TLSStatus(), nil
}

// tlsCollector exposes the certificates in use and refused reloads.
type tlsCollector struct{ s *Server }

var (
	descCertNotAfter = prometheus.NewDesc("jobfabric_tls_certificate_not_after_seconds",
		"When the certificate this member serves expires (Unix seconds), by listener (api, raft) and serial: alert well before it.", []string{"listener", "serial"}, nil)
	descReloadErrors = prometheus.NewDesc("jobfabric_tls_reload_errors_total",
		"Refused reloads of the TLS files (what: tls) or the cluster secret file (what: secret): the file in use was kept; the log and GET /v1/cluster/tls say why.", []string{"what"}, nil)
	descReloads = prometheus.NewDesc("jobfabric_tls_reloads_total",
		"New TLS files (what: tls) or cluster secrets (what: secret) taken without a restart.", []string{"what"}, nil)
)

func (c tlsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCertNotAfter
	ch <- descReloadErrors
	ch <- descReloads
}

func (c tlsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.TLSStatus()
	if st.API != nil {
		ch <- prometheus.MustNewConstMetric(descCertNotAfter, prometheus.GaugeValue, float64(st.API.NotAfter.Unix()), "api", st.API.Serial)
		ch <- prometheus.MustNewConstMetric(descReloadErrors, prometheus.CounterValue, float64(st.API.Errors), "tls")
		ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(st.API.Reloads), "tls")
	}
	if st.RaftSerial != "" {
		ch <- prometheus.MustNewConstMetric(descCertNotAfter, prometheus.GaugeValue, float64(st.RaftNotAfter.Unix()), "raft", st.RaftSerial)
	}
	if st.Secret != nil {
		ch <- prometheus.MustNewConstMetric(descReloadErrors, prometheus.CounterValue, float64(st.Secret.Errors), "secret")
		ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(st.Secret.Reloads), "secret")
	}
}
