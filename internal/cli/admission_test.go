package cli

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAdmissionFlags: bad --api-* and --raft-* values are refused naming the flag and
// the value, before the server starts (no data dir is made); trusted
// sources take addresses and prefixes.
func TestAdmissionFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	runErrCases(t, map[string]errCase{
		"negative rate":        {args: []string{"server", "--data-dir", dir, "--api-conn-rate", "-1"}, want: "--api-conn-rate -1"},
		"rate without burst":   {args: []string{"server", "--data-dir", dir, "--api-conn-burst", "0"}, want: "--api-conn-burst 0"},
		"negative per source":  {args: []string{"server", "--data-dir", dir, "--api-conns-per-source", "-3"}, want: "--api-conns-per-source -3"},
		"negative handshakes":  {args: []string{"server", "--data-dir", dir, "--api-handshakes", "-1"}, want: "--api-handshakes -1"},
		"source handshakes":    {args: []string{"server", "--data-dir", dir, "--api-source-handshakes", "-1"}, want: "--api-source-handshakes -1"},
		"handshake burst":      {args: []string{"server", "--data-dir", dir, "--api-handshake-rate", "100", "--api-handshake-burst", "0"}, want: "--api-handshake-burst 0"},
		"auth window":          {args: []string{"server", "--data-dir", dir, "--api-auth-window", "0s"}, want: "--api-auth-window 0s"},
		"trusted source":       {args: []string{"server", "--data-dir", dir, "--api-trusted-sources", "10.0.0.0/33"}, want: `--api-trusted-sources "10.0.0.0/33"`},
		"raft negative rate":   {args: []string{"server", "--data-dir", dir, "--raft-conn-rate", "-1"}, want: "--raft-conn-rate -1"},
		"raft rate, no burst":  {args: []string{"server", "--data-dir", dir, "--raft-conn-burst", "0"}, want: "--raft-conn-burst 0"},
		"raft per source":      {args: []string{"server", "--data-dir", dir, "--raft-conns-per-source", "-2"}, want: "--raft-conns-per-source -2"},
		"raft handshakes":      {args: []string{"server", "--data-dir", dir, "--raft-handshakes", "-1"}, want: "--raft-handshakes -1"},
		"raft source hs":       {args: []string{"server", "--data-dir", dir, "--raft-source-handshakes", "-1"}, want: "--raft-source-handshakes -1"},
		"raft handshake burst": {args: []string{"server", "--data-dir", dir, "--raft-handshake-rate", "50", "--raft-handshake-burst", "0"}, want: "--raft-handshake-burst 0"},
		"raft trusted source":  {args: []string{"server", "--data-dir", dir, "--raft-trusted-sources", "fe80::/129"}, want: `--raft-trusted-sources "fe80::/129"`},
	})
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused flag made the data dir")
	}
	got, err := parseSources("api-trusted-sources", []string{"10.1.2.3", " 10.1.0.0/16 ", "10.9.9.9/24", "2001:db8::1", "2001:db8:1::/48", "::ffff:10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var want []netip.Prefix
	for _, p := range []string{"10.1.2.3/32", "10.1.0.0/16", "10.9.9.0/24", "2001:db8::1/128", "2001:db8:1::/48", "10.0.0.1/32"} {
		want = append(want, netip.MustParsePrefix(p))
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseSources = %v, want %v", got, want)
	}
}
