package verify_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// BenchmarkVerifyLarge verifies the compiled intent of issue #4's scale:
// 256 leaves, 16 spines, 1,000 tenants, 10,000 running jobs.
func BenchmarkVerifyLarge(b *testing.B) {
	benchVerify(b, fabrictest.ScaleOptions{})
}

// BenchmarkVerify100k verifies the compiled intent of issue 18's scale:
// a three-tier fabric of 1,568 leaves (196 stripes, 4 pods, 4
// super-spines), 5,000 tenants with VRFs where used, 50,176 running jobs:
// the verifier is most of a fabric-loop revision there.
func BenchmarkVerify100k(b *testing.B) {
	benchVerify(b, fabrictest.ScaleOptions{Stripes: 196, SuperSpines: 4, Pods: 4, Tenants: 5000, Jobs: 196 * 256, Placement: fabric.VRFsWhereUsed})
}

// benchVerify verifies the compile of the scale o describes, and reports
// the CPU time per verify, the garbage collector's included: on a shared
// machine wall time measures the other load as much as the verifier.
func benchVerify(b *testing.B, o fabrictest.ScaleOptions) {
	in, err := fabrictest.Scale(o)
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
	b.ReportMetric(float64((processCPU()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
