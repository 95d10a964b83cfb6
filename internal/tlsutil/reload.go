package tlsutil

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Files names the PEM files of one TLS identity. CA is optional.
type Files struct {
	Cert, Key, CA string
}

// Info describes the certificate in use, for metrics and status.
type Info struct {
	// Serial is the certificate's serial number in hex.
	Serial string `json:"serial"`
	// Subject is the certificate's subject.
	Subject string `json:"subject"`
	// NotBefore and NotAfter bound the certificate's validity.
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	// CAs is how many certificates the CA bundle holds (0: no CA file).
	CAs int `json:"cas"`
	// LoadedAt is when this certificate was loaded.
	LoadedAt time.Time `json:"loadedAt"`
}

// Bundle is one loaded generation of Files: a key pair that matches and is
// valid now, and the CA pool.
type Bundle struct {
	Cert tls.Certificate // Leaf is set
	Pool *x509.CertPool  // nil without a CA file
	Info Info
	sum  [sha256.Size]byte // of the files' contents, to skip unchanged ones
}

// ServerTLS is ServerConfig's configuration for this bundle.
func (b *Bundle) ServerTLS() *tls.Config {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{b.Cert},
	}
	if b.Pool != nil {
		cfg.ClientCAs = b.Pool
		cfg.RootCAs = b.Pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg
}

// ClientTLS is ClientConfig's configuration for this bundle: it verifies
// servers against the CA bundle, or the system pool without one.
func (b *Bundle) ClientTLS(serverName string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, RootCAs: b.Pool}
}

// Load reads and checks files at now. Each refusal names the file and the
// rule it breaks: unreadable, not PEM, a key that does not match the
// certificate, a certificate not yet valid or expired, a CA file without
// a certificate.
func Load(f Files, now time.Time) (*Bundle, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("tlsutil: a server certificate needs both a certificate and a key file")
	}
	certPEM, keyPEM, caPEM, err := readFiles(f)
	if err != nil {
		return nil, err
	}
	return parse(f, certPEM, keyPEM, caPEM, now)
}

// FileError is Load's refusal: which of the files (Kind "cert", "key" or
// "ca") and why, so that a caller can name its flag.
type FileError struct {
	Kind, Path string
	Err        error
}

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

func readFiles(f Files) (certPEM, keyPEM, caPEM []byte, err error) {
	if certPEM, err = os.ReadFile(f.Cert); err != nil {
		return nil, nil, nil, &FileError{"cert", f.Cert, fmt.Errorf("tlsutil: read certificate: %w", err)}
	}
	if keyPEM, err = os.ReadFile(f.Key); err != nil {
		return nil, nil, nil, &FileError{"key", f.Key, fmt.Errorf("tlsutil: read key: %w", err)}
	}
	if f.CA != "" {
		if caPEM, err = os.ReadFile(f.CA); err != nil {
			return nil, nil, nil, &FileError{"ca", f.CA, fmt.Errorf("tlsutil: read CA file: %w", err)}
		}
	}
	return certPEM, keyPEM, caPEM, nil
}

func sum(certPEM, keyPEM, caPEM []byte) [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{certPEM, keyPEM, caPEM} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var s [sha256.Size]byte
	copy(s[:], h.Sum(nil))
	return s
}

func parse(f Files, certPEM, keyPEM, caPEM []byte, now time.Time) (*Bundle, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &FileError{"cert", f.Cert, fmt.Errorf("tlsutil: load key pair %s, %s (the key must match the certificate): %w", f.Cert, f.Key, err)}
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, &FileError{"cert", f.Cert, fmt.Errorf("tlsutil: certificate %s: %w", f.Cert, err)}
		}
		cert.Leaf = leaf
	}
	if now.Before(leaf.NotBefore) {
		return nil, &FileError{"cert", f.Cert, fmt.Errorf("tlsutil: certificate %s (serial %x) is not valid before %s: not yet valid at %s", f.Cert, leaf.SerialNumber, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	if now.After(leaf.NotAfter) {
		return nil, &FileError{"cert", f.Cert, fmt.Errorf("tlsutil: certificate %s (serial %x) expired at %s", f.Cert, leaf.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	b := &Bundle{
		Cert: cert,
		Info: Info{
			Serial:    fmt.Sprintf("%x", leaf.SerialNumber),
			Subject:   leaf.Subject.String(),
			NotBefore: leaf.NotBefore,
			NotAfter:  leaf.NotAfter,
			LoadedAt:  now,
		},
		sum: sum(certPEM, keyPEM, caPEM),
	}
	if f.CA != "" {
		if b.Pool, b.Info.CAs, err = parsePool(f.CA, caPEM); err != nil {
			return nil, &FileError{"ca", f.CA, err}
		}
	}
	return b, nil
}

// parsePool reads a PEM bundle. An empty pool is an error: it would
// silently reject every peer, which is harder to diagnose than a refusal.
func parsePool(name string, data []byte) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, 0, fmt.Errorf("tlsutil: CA file %s: certificate %d: %w", name, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("tlsutil: CA file %s holds no PEM certificate", name)
	}
	return pool, n, nil
}

// Status is a Reloader's state: the certificate in use and the last
// refused reload.
type Status struct {
	Info Info `json:"certificate"`
	// Reloads counts the new certificates taken since start.
	Reloads uint64 `json:"reloads"`
	// LastError is the last refused reload ("" since the last success:
	// a good file clears it); LastErrorAt is when it happened.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Errors counts refused reloads since start.
	Errors uint64 `json:"errors"`
}

// Reloader keeps a Bundle current with its files: Reload (on SIGHUP) and
// Run (a poll of the files' content) load a changed set, and a set that
// fails Load is refused, logged and the one in use kept. Handshakes
// started after a reload use the new bundle; open connections go on.
type Reloader struct {
	files Files
	clock tstime.Clock
	log   *slog.Logger

	mu       sync.Mutex // serialises reloads and guards the fields below
	tried    [sha256.Size]byte
	refused  error // why the content r.tried was refused; nil if it was not
	onChange []func(*Bundle)
	status   Status
	warned   time.Time // the last expiry warning (see warnExpiry)

	cur atomic.Pointer[generation]
}

type generation struct {
	b      *Bundle
	server *tls.Config // the HTTP server's, see ServerConfig
}

// NewReloader loads files, failing when they do not pass Load.
func NewReloader(f Files, clock tstime.Clock, log *slog.Logger) (*Reloader, error) {
	b, err := Load(f, clock.Now())
	if err != nil {
		return nil, err
	}
	r := &Reloader{files: f, clock: clock, log: log, tried: b.sum}
	r.status.Info = b.Info
	r.cur.Store(newGeneration(b))
	return r, nil
}

func newGeneration(b *Bundle) *generation {
	srv := b.ServerTLS()
	// A config handed out by GetConfigForClient is used as it is: offer
	// what net/http's ServeTLS would.
	srv.NextProtos = []string{"h2", "http/1.1"}
	return &generation{b: b, server: srv}
}

// Files are the files the Reloader watches.
func (r *Reloader) Files() Files { return r.files }

// Current is the bundle in use.
func (r *Reloader) Current() *Bundle { return r.cur.Load().b }

// Status reports the bundle in use and the last refusal.
func (r *Reloader) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// OnChange calls fn with each new bundle, after it is in use. Register
// before Run; fn runs under the Reloader's lock, so reloads are seen in
// order.
func (r *Reloader) OnChange(fn func(*Bundle)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onChange = append(r.onChange, fn)
}

// ServerConfig is an HTTP server's TLS configuration that serves the
// bundle current at each handshake (certificate and client CAs), with
// ServerConfig's settings. It offers h2 and http/1.1.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().server, nil
		},
	}
}

// Reload loads the files if their content changed since the last attempt;
// it reports whether a new bundle is in use. A refusal is logged, kept in
// Status and returned; the bundle in use stays. The same refused content
// is not tried, logged or counted again until it changes, but its refusal
// is returned again: a SIGHUP that meets it must not read as a success.
func (r *Reloader) Reload() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.warnExpiry()
	certPEM, keyPEM, caPEM, err := readFiles(r.files)
	if err == nil {
		s := sum(certPEM, keyPEM, caPEM)
		if s == r.tried {
			return false, r.refused
		}
		r.tried, r.refused = s, nil
		if s == r.cur.Load().b.sum {
			// Back to the files in use (after a read error, say).
			r.status.LastError, r.status.LastErrorAt = "", time.Time{}
			return false, nil
		}
		var b *Bundle
		if b, err = parse(r.files, certPEM, keyPEM, caPEM, r.clock.Now()); err == nil {
			r.cur.Store(newGeneration(b))
			old := r.status.Info
			r.status = Status{Info: b.Info, Reloads: r.status.Reloads + 1, Errors: r.status.Errors}
			r.log.Info("TLS certificate reloaded", "cert", r.files.Cert, "ca", r.files.CA,
				"serial", b.Info.Serial, "not_after", b.Info.NotAfter, "previous_serial", old.Serial, "cas", b.Info.CAs)
			for _, fn := range r.onChange {
				fn(b)
			}
			return true, nil
		}
	} else if r.status.LastError == err.Error() {
		return false, err // still unreadable: said so already
	} else {
		r.tried = [sha256.Size]byte{} // readable again later: try it
	}
	r.refused = err
	r.status.LastError, r.status.LastErrorAt = err.Error(), r.clock.Now()
	r.status.Errors++
	r.log.Error("TLS reload refused; the certificate in use is kept", "err", err,
		"serial_in_use", r.status.Info.Serial, "not_after_in_use", r.status.Info.NotAfter)
	return false, err
}

// ExpiryWarning is how long before its end the certificate in use is
// logged as expiring (once a day): a renewal that keeps failing, or none
// configured, shows in the log as well as in the metrics.
const ExpiryWarning = 14 * 24 * time.Hour

// warnExpiry logs the certificate in use when it ends within
// ExpiryWarning, or has ended, at most once a day; r.mu is held.
func (r *Reloader) warnExpiry() {
	now := r.clock.Now()
	info := r.cur.Load().b.Info
	if now.Before(info.NotAfter.Add(-ExpiryWarning)) || (!r.warned.IsZero() && now.Sub(r.warned) < 24*time.Hour) {
		return
	}
	r.warned = now
	if now.After(info.NotAfter) {
		r.log.Error("TLS certificate in use has expired: clients and peers refuse it; put a renewed one in its files",
			"cert", r.files.Cert, "serial", info.Serial, "not_after", info.NotAfter)
		return
	}
	r.log.Warn("TLS certificate in use expires soon; put a renewed one in its files",
		"cert", r.files.Cert, "serial", info.Serial, "not_after", info.NotAfter, "left", info.NotAfter.Sub(now).Round(time.Hour))
}

// Run reloads every interval until ctx ends.
func (r *Reloader) Run(ctx context.Context, every time.Duration) {
	tk, c := r.clock.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			r.Reload()
		}
	}
}
