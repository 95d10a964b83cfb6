package deploy

import (
	"context"
	"testing"
)

// BenchmarkSSHCommand: one command on a switch over the connection the
// driver keeps, against one that dials (TCP, key exchange, host key and
// user key checks) for each command, as a driver without a kept
// connection would. Real sshd in a namespace (root, openssh-server).
func BenchmarkSSHCommand(b *testing.B) {
	r := newSSHRig(b)
	ctx := context.Background()
	b.Run("kept", func(b *testing.B) {
		s := NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, "", 0)
		defer s.Close()
		h, _ := s.Host("leaf1")
		for b.Loop() {
			if _, err := h.Run(ctx, "true"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dial", func(b *testing.B) {
		for b.Loop() {
			s := NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, "", 0)
			h, _ := s.Host("leaf1")
			if _, err := h.Run(ctx, "true"); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
}

// BenchmarkSSHApply: one device's whole deploy to real FRR (guard,
// frr.conf.next, frr-reload --test, --reload; two configs alternate so
// each reload changes a neighbor), over SSH and, for comparison, by the
// frr driver on the same machine.
func BenchmarkSSHApply(b *testing.B) {
	r := newSSHRig(b)
	ctx := context.Background()
	confs := []string{sshConfV1, sshConfV2}
	for _, drv := range []struct {
		name string
		d    Driver
	}{
		{"ssh", NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, "", 0)},
		{"local", &FRR{Run: ExecRunner, Targets: map[string]FRRTarget{"leaf1": r.target(r.addr).FRRTarget}}},
	} {
		b.Run(drv.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := drv.d.Apply(ctx, dev("leaf1", "h", "frr.conf", confs[i%2], "guard.nft", sshGuard)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		if c, ok := drv.d.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}
