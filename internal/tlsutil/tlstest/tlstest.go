package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Generate creates a CA and a certificate (ECDSA P-256) signed by it, valid
// for hosts (IP addresses or DNS names; 127.0.0.1, ::1 and localhost when
// none are given), and writes them to dir as cert.pem, key.pem and ca.pem.
// Use a distinct dir per call: the file names are fixed.
//
// The certificate carries both server and client authentication usages so
// that one file pair can serve and dial, as Raft peers do with mutual TLS.
func Generate(t testing.TB, dir string, hosts ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	ca := NewCA(t)
	certFile, keyFile = ca.Issue(t, dir, Leaf{Hosts: hosts})
	return certFile, keyFile, ca.Write(t, filepath.Join(dir, "ca.pem"))
}

// GenerateRSA is Generate with an RSA key of bits for the certificate (the
// CA stays ECDSA): what operators often serve with, and what makes a TLS
// handshake expensive for the server (a signature of 1-10 ms).
func GenerateRSA(t testing.TB, dir string, bits int, hosts ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	ca := NewCA(t)
	certFile, keyFile = ca.Issue(t, dir, Leaf{Hosts: hosts, Key: func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, bits) }})
	return certFile, keyFile, ca.Write(t, filepath.Join(dir, "ca.pem"))
}

// CA is a throwaway certificate authority that can issue several leaves:
// what a rotation test needs (a renewed certificate under the same CA, or
// one under a new CA).
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	der  []byte
}

// NewCA creates a CA valid from an hour ago for 48 hours.
func NewCA(t testing.TB) *CA {
	t.Helper()
	// Backdate so that small clock differences between test processes and
	// certificate checks never make a fresh certificate "not yet valid".
	notBefore := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: generate CA key: %v", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "jobfabric test CA", Organization: []string{"jobfabric"}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("tlstest: create CA certificate: %v", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("tlstest: parse CA certificate: %v", err)
	}
	return &CA{Cert: caCert, key: caKey, der: caDER}
}

// PEM is the CA certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Write writes the CA certificate to path and returns path.
func (ca *CA) Write(t testing.TB, path string) string {
	t.Helper()
	writeFile(t, path, ca.PEM(), 0o644)
	return path
}

// Leaf describes a certificate to issue; the zero value is an ECDSA P-256
// server and client certificate for 127.0.0.1, ::1 and localhost, valid
// from an hour ago for 48 hours.
type Leaf struct {
	Hosts               []string
	NotBefore, NotAfter time.Time
	Key                 func() (crypto.Signer, error)
}

// Issue creates a certificate signed by ca and writes it to dir as cert.pem
// and key.pem (replacing them: a rotation on disk).
func (ca *CA) Issue(t testing.TB, dir string, l Leaf) (certFile, keyFile string) {
	t.Helper()
	cert, key := ca.IssuePEM(t, l)
	certFile = filepath.Join(dir, "cert.pem")
	keyFile = filepath.Join(dir, "key.pem")
	writeFile(t, certFile, cert, 0o644)
	writeFile(t, keyFile, key, 0o600)
	return certFile, keyFile
}

// IssuePEM is Issue returning the PEM blocks instead of writing them.
func (ca *CA) IssuePEM(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	if len(l.Hosts) == 0 {
		l.Hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = l.NotBefore.Add(48 * time.Hour)
	}
	if l.Key == nil {
		l.Key = func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	}
	key, err := l.Key()
	if err != nil {
		t.Fatalf("tlstest: generate key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "jobfabric test", Organization: []string{"jobfabric"}},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range l.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("tlstest: create certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("tlstest: serial number: %v", err)
	}
	return n
}

func writeFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatalf("tlstest: write %s: %v", path, err)
	}
}
