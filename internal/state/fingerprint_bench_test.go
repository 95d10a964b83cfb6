package state

import (
	"fmt"
	"testing"
)

// BenchmarkFabricFingerprint: the fabric loop's question after every burst
// of changes, on a state of 5,000 tenants (issue 18's cluster) and as
// many jobs holding GPUs, nothing changed since the last call.
func BenchmarkFabricFingerprint(b *testing.B) {
	h := newHarness(b).cluster(8, 32, 1024)
	for i := range 5000 { // not through h.must: its checks walk the whole state
		e, err := Encode(CmdTenantCreate, h.at, "admin:bench", TenantCreate{Tenant: MakeTenant(fmt.Sprintf("t%04d", i)).Obj()})
		if err != nil {
			b.Fatal(err)
		}
		if r := h.f.ApplyCommand(e); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	h.f.FabricFingerprint()
	b.ResetTimer()
	for range b.N {
		h.f.FabricFingerprint()
	}
}

// BenchmarkFabricFingerprintJobs: the same question on a state holding
// 100,000 live jobs (2,048 of them holding GPUs), 10 of them changed since
// the last call (their runtimes reported).
func BenchmarkFabricFingerprintJobs(b *testing.B) {
	h, placed := liveState(b, 100_000)
	h.f.FabricFingerprint()
	next := 0
	b.ResetTimer()
	for i := range b.N {
		h.reportRunning(b, placed, &next, i)
		h.f.FabricFingerprint()
	}
}
