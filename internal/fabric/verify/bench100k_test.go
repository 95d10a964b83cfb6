package verify_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// BenchmarkVerify100k verifies the compiled intent of issue 18's scale:
// a three-tier fabric of 1,568 leaves (196 stripes, 4 pods, 4
// super-spines), 5,000 tenants with VRFs where used, 50,176 running jobs:
// the verifier is most of a fabric-loop revision there.
func BenchmarkVerify100k(b *testing.B) {
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 196, SuperSpines: 4, Pods: 4, Tenants: 5000, Jobs: 196 * 256, Placement: fabric.VRFsWhereUsed})
	if err != nil {
		b.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := processCPU()
	for b.Loop() {
		if r := verify.Verify(in, it); !r.OK() {
			b.Fatal(r)
		}
	}
	// CPU time, the garbage collector's included: on a shared machine
	// wall time measures the other load as much as the verifier.
	b.ReportMetric(float64((processCPU()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
