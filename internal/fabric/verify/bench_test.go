package verify_test

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// BenchmarkVerifyLarge verifies the compiled intent of issue #4's scale:
// 256 leaves, 16 spines, 1,000 tenants, 10,000 running jobs.
func BenchmarkVerifyLarge(b *testing.B) {
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if r := verify.Verify(in, it); !r.OK() {
			b.Fatal(r)
		}
	}
}
