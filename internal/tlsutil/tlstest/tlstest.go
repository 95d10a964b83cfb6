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
	return generate(t, dir, func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }, hosts)
}

// GenerateRSA is Generate with an RSA key of bits for the certificate (the
// CA stays ECDSA): what operators often serve with, and what makes a TLS
// handshake expensive for the server (a signature of 1-10 ms).
func GenerateRSA(t testing.TB, dir string, bits int, hosts ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	return generate(t, dir, func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, bits) }, hosts)
}

func generate(t testing.TB, dir string, newKey func() (crypto.Signer, error), hosts []string) (certFile, keyFile, caFile string) {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	// Backdate so that small clock differences between test processes and
	// certificate checks never make a fresh certificate "not yet valid".
	notBefore := time.Now().Add(-time.Hour)
	notAfter := notBefore.Add(48 * time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: generate CA key: %v", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "jobfabric test CA", Organization: []string{"jobfabric"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
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

	key, err := newKey()
	if err != nil {
		t.Fatalf("tlstest: generate key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"jobfabric"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		t.Fatalf("tlstest: create certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: marshal key: %v", err)
	}

	certFile = filepath.Join(dir, "cert.pem")
	keyFile = filepath.Join(dir, "key.pem")
	caFile = filepath.Join(dir, "ca.pem")
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER, 0o600)
	writePEM(t, caFile, "CERTIFICATE", caDER, 0o644)
	return certFile, keyFile, caFile
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("tlstest: serial number: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatalf("tlstest: write %s: %v", path, err)
	}
}
