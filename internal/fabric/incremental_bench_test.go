package fabric_test

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
)

// scaleInput is issue #4's scale: 256 leaves, 16 spines, 2,048 servers,
// 1,000 tenants, 10,000 running jobs (fabrictest.Scale).
func scaleInput(b *testing.B) fabric.Input {
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

func BenchmarkCompileScale(b *testing.B) {
	in := scaleInput(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := fabric.Compile(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIncrementalJobStart times Compiler.Apply for one job start of 4
// GPUs on a free server (a segmented tenant: allocation, group, contract),
// at issue #4's scale; the stop that undoes it is not timed.
func BenchmarkIncrementalJobStart(b *testing.B) {
	in := scaleInput(b)
	k, err := fabric.NewCompiler(in)
	if err != nil {
		b.Fatal(err)
	}
	free := fabrictest.FreeServers(in)
	var starts, stops []fabric.Change
	for i := range 16 {
		tenant := in.Tenants[(i*3)%len(in.Tenants)].Name // every 3rd tenant is segmented
		_, ch, err := fabrictest.StartJob(in, tenant, free[i%len(free)], fmt.Sprint("bench-", i), []int{0, 1, 2, 3}, uint16(50000+i))
		if err != nil {
			b.Fatal(err)
		}
		starts, stops = append(starts, ch), append(stops, fabrictest.StopJob(ch))
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		devs, err := k.Apply(starts[i%len(starts)])
		if err != nil || len(devs) == 0 {
			b.Fatalf("start: %d devices, %v", len(devs), err)
		}
		b.StopTimer()
		if _, err := k.Apply(stops[i%len(stops)]); err != nil {
			b.Fatal(err)
		}
		i++
		b.StartTimer()
	}
}
