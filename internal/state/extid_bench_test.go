package state

import (
	"fmt"
	"testing"
)

// BenchmarkExternalIDSubmit is a runtime's submit (a Slurm or Kubernetes
// job, with its external id) applied to a state of 100,000 live jobs that
// have external ids, then the prolog's look-up of it by that id: the
// submit checks that no live job has the id.
func BenchmarkExternalIDSubmit(b *testing.B) {
	h := newHarness(b).cluster(1, 2, 8)
	apply := h.benchApply(b)
	for i := range 100_000 {
		s := MakeJob("research", 1).Obj()
		s.Spec.ExternalID = fmt.Sprintf("slurm:%d", i)
		apply(CmdJobSubmit, s)
	}
	b.ResetTimer()
	i := 100_000
	for b.Loop() {
		s := MakeJob("research", 1).Obj()
		ext := fmt.Sprintf("slurm:%d", i)
		s.Spec.ExternalID = ext
		apply(CmdJobSubmit, s)
		if _, ok := h.f.JobByExternalID(ext, s.Spec.Tenant); !ok {
			b.Fatalf("%s not found", ext)
		}
		i++
	}
}
