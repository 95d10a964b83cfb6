package store

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateSecret(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	for name, tc := range map[string]struct {
		secret []byte
		ok     bool
	}{
		"32 random bytes":      {random(32), true},
		"base64 of 32 bytes":   {[]byte(base64.StdEncoding.EncodeToString(random(32))), true},
		"hex of 32 bytes":      {[]byte(hex.EncodeToString(random(32))), true},
		"test secret":          {testSecret, true},
		"31 random bytes":      {random(31), false},
		"empty":                {[]byte{}, false},
		"repeated word":        {[]byte(strings.Repeat("password", 5)), false},
		"one character":        {[]byte(strings.Repeat("a", 64)), false},
		"passphrase":           {[]byte("correct horse battery staple!!!!"), false},
		"placeholder":          {[]byte("changeme-changeme-changeme-changeme"), false},
		"hex counter":          {[]byte(strings.Repeat("0123456789abcdef", 4)), false},
		"base64 of zero bytes": {[]byte(base64.StdEncoding.EncodeToString(make([]byte, 32))), false},
		"hex of 32 zero bytes": {[]byte(hex.EncodeToString(make([]byte, 32))), false},
		"base64 of 48 bytes":   {[]byte(base64.StdEncoding.EncodeToString(random(48))), true},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateSecret(tc.secret)
			t.Logf("%.0f bits", entropyBits(tc.secret))
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrWeakSecret) {
				t.Fatalf("err = %v, want ErrWeakSecret", err)
			}
		})
	}
}

// TestSecretDerivation: the same secret gives members certificates that
// verify each other; another secret's do not.
func TestSecretDerivation(t *testing.T) {
	_, dialA, err := SecretTLS(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	srvB, _, err := SecretTLS(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	other := []byte(base64.StdEncoding.EncodeToString([]byte("another cluster's secret, 32+ bytes long!")))
	srvC, _, err := SecretTLS(other)
	if err != nil {
		t.Fatal(err)
	}
	leafA := dialA.Certificates[0].Certificate[0]
	if string(leafA) == string(srvB.Certificates[0].Certificate[0]) {
		t.Error("two starts share a leaf certificate: the leaf key must be ephemeral")
	}
	if err := verifyLeaf(leafA, srvB); err != nil {
		t.Errorf("member certificate refused by a member with the same secret: %v", err)
	}
	if err := verifyLeaf(leafA, srvC); err == nil {
		t.Error("member certificate accepted under another secret")
	}
}

func verifyLeaf(der []byte, srv *tls.Config) error {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: srv.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// TestSecretsOverlap: a member issuing under one secret and accepting
// another verifies members of either, and is verified by those that accept
// its issuing secret only; its certificate outlives any member (a member
// running for years never needs a renewal for time), and fingerprints name
// the secret.
func TestSecretsOverlap(t *testing.T) {
	srvBoth, dialBoth, err := SecretsTLS(otherSecret, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	srvOld, dialOld, err := SecretTLS(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	srvNew, dialNew, err := SecretTLS(otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		leaf *tls.Config
		srv  *tls.Config
		want bool
	}{
		"old member by overlap":  {dialOld, srvBoth, true},
		"new member by overlap":  {dialNew, srvBoth, true},
		"overlap by new member":  {dialBoth, srvNew, true},
		"overlap by old member":  {dialBoth, srvOld, false}, // issues under the new secret
		"new member by old only": {dialNew, srvOld, false},
	} {
		err := verifyLeaf(c.leaf.Certificates[0].Certificate[0], c.srv)
		if (err == nil) != c.want {
			t.Errorf("%s: verify err %v, want accepted %v", name, err, c.want)
		}
	}
	leaf := dialBoth.Certificates[0].Leaf
	if leaf == nil || leaf.NotAfter.Year() < 2120 || leaf.NotBefore.After(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("secret-derived certificate valid %v to %v: a member must never see it expire", leaf.NotBefore, leaf.NotAfter)
	}
	if _, _, err := SecretsTLS(otherSecret, []byte("short")); err == nil || !strings.Contains(err.Error(), "accepted secret 2") {
		t.Errorf("weak accepted secret: err %v", err)
	}
	a, b := SecretFingerprint(testSecret), SecretFingerprint(otherSecret)
	if a == b || a != SecretFingerprint(testSecret) || len(a) != 16 || strings.Contains(string(testSecret), a) {
		t.Errorf("fingerprints %s, %s", a, b)
	}
}

// TestNewSecret: a new secret is one ValidateSecret accepts, in base64 of
// MinSecretLen bytes, and never the same twice.
func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateSecret(a); err != nil {
		t.Errorf("ValidateSecret(%s) = %v", a, err)
	}
	if raw, err := base64.StdEncoding.DecodeString(string(a)); err != nil || len(raw) != MinSecretLen {
		t.Errorf("%s: %d bytes of base64 (%v), want %d", a, len(raw), err, MinSecretLen)
	}
	if string(a) == string(b) {
		t.Error("two new secrets are the same")
	}
}
