package store

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"
)

const (
	// MinSecretLen is the shortest cluster secret accepted, in bytes.
	MinSecretLen = 32
	// minSecretBits is the least estimated entropy of a cluster secret;
	// see entropyBits. 32 random bytes, raw or in base64 or hex, score
	// 150 to 220; a repeated word or a short passphrase scores below.
	minSecretBits = 128
	// peerServerName is the name every secret-derived leaf carries and every
	// member expects: whoever holds the secret is a member, so the dialled
	// host name adds nothing.
	peerServerName = "raft.jobfabric.internal"
	// hkdfSalt versions the derivation: a new scheme gets a new salt, so
	// the same secret never yields the same CA under two schemes.
	hkdfSalt = "jobfabric raft cluster CA v1"
)

// ErrWeakSecret is wrapped by ValidateSecret's errors.
var ErrWeakSecret = errors.New("cluster secret too weak")

// ValidateSecret refuses a cluster secret that is short or visibly not
// random. It cannot prove randomness; it catches passwords and placeholders.
func ValidateSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: %d bytes, need at least %d random bytes", ErrWeakSecret, len(secret), MinSecretLen)
	}
	if bits := entropyBits(secret); bits < minSecretBits {
		return fmt.Errorf("%w: about %.0f bits of entropy in %d bytes (repeated or predictable characters), need random data", ErrWeakSecret, bits, len(secret))
	}
	return nil
}

// NewSecret returns a new cluster secret: MinSecretLen random bytes in
// base64 (what `jobfabric cluster secret` prints and a secret file holds).
func NewSecret() ([]byte, error) {
	b := make([]byte, MinSecretLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate cluster secret: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b)), nil
}

// entropyBits estimates the entropy of b: the empirical entropy of its
// bytes times the number of distinct byte pairs in it, so that repeating a
// short string adds length but no entropy.
func entropyBits(b []byte) float64 {
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	n := float64(len(b))
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	pairs := map[[2]byte]bool{}
	for i := 1; i < len(b); i++ {
		pairs[[2]byte{b[i-1], b[i]}] = true
	}
	return h * float64(len(pairs)+1)
}

// SecretTLS derives the cluster CA from the secret and issues this
// process's leaf certificate under it. Every member holding the same secret
// derives the same CA key, so members verify each other with ordinary
// TLS 1.3 and a required client certificate: the stream is encrypted and
// integrity-protected, not only authenticated at the handshake. Go's TLS
// has no external pre-shared keys; a derived CA gives the same property
// with the standard handshake. The leaf key is new on every call and
// never stored.
//
// It is exported for tests that play a member holding some secret.
func SecretTLS(secret []byte) (serverTLS, dialTLS *tls.Config, err error) {
	return SecretsTLS(secret)
}

// SecretsTLS is SecretTLS for a rotation: the leaf is issued under the CA
// of issue, and peers are accepted (as clients and as servers) under the
// CA of issue or of any secret in accept. A member that holds the new
// secret in accept verifies a peer that already issues under it, and one
// that still issues under the old; see docs/operations.md.
func SecretsTLS(issue []byte, accept ...[]byte) (serverTLS, dialTLS *tls.Config, err error) {
	if err := ValidateSecret(issue); err != nil {
		return nil, nil, err
	}
	ca, caKey, err := secretCA(issue)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for i, sec := range accept {
		if err := ValidateSecret(sec); err != nil {
			return nil, nil, fmt.Errorf("accepted secret %d: %w", i+2, err)
		}
		c, _, err := secretCA(sec)
		if err != nil {
			return nil, nil, err
		}
		pool.AddCert(c)
	}

	leafPub, leafKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("store: generate raft key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, fmt.Errorf("store: certificate serial: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "jobfabric raft member"},
		DNSNames:     []string{peerServerName},
		// The CA's window: members with skewed clocks still agree, and a
		// member running for years never sees its certificate expire (it
		// ends in 2120). A rotation changes the secret, not the calendar.
		NotBefore:   secretNotBefore,
		NotAfter:    secretNotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(nil, leafTmpl, ca, leafPub, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("store: issue raft certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return nil, nil, fmt.Errorf("store: parse raft certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey, Leaf: leaf}
	serverTLS = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	dialTLS = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   peerServerName,
	}
	return serverTLS, dialTLS, nil
}

// The secret-derived certificates' validity: fixed, so that every member
// builds the same CA certificate (ed25519 signatures are deterministic).
var (
	secretNotBefore = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	secretNotAfter  = time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC)
)

// secretCA derives the cluster CA of one secret.
func secretCA(secret []byte) (*x509.Certificate, ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, secret, []byte(hkdfSalt), "ed25519 CA key", ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("store: derive cluster CA: %w", err)
	}
	caKey := ed25519.NewKeyFromSeed(seed)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "jobfabric raft cluster CA"},
		NotBefore:             secretNotBefore,
		NotAfter:              secretNotAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(nil, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("store: create cluster CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, fmt.Errorf("store: parse cluster CA: %w", err)
	}
	return ca, caKey, nil
}

// SecretFingerprint names a secret without revealing it: the first 8
// bytes, in hex, of the SHA-256 of the public key of the CA it derives.
// Members holding the same secret show the same fingerprint; HKDF and
// the public key are one-way, so it tells nothing of the secret.
func SecretFingerprint(secret []byte) string {
	ca, _, err := secretCA(secret)
	if err != nil {
		return "invalid"
	}
	sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:8])
}
