package render_test

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// BenchmarkRenderAndLint renders a mid-sized busy fabric (8 stripes x 32
// servers: 64 leaves, 8 spines, 200 tenants, 1,000 jobs) per NOS, and
// lints the render: the lint runs before every deploy, so its cost is
// measured against the render's, in the same run.
//
//	go test -run '^$' -bench RenderAndLint -benchtime 5x -count 5 ./internal/fabric/render/
func BenchmarkRenderAndLint(b *testing.B) {
	for _, nos := range []string{"junos", "nxos", "eos", "frr"} {
		in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 8, ServersPerStripe: 32, Spines: 8, Tenants: 200, Jobs: 1000, NOS: nos})
		if err != nil {
			b.Fatal(err)
		}
		if nos == "junos" {
			in.Options.Overlay = fabric.OverlayOnLoopbacks // Junos spines keep next hops per session only
		}
		it, err := fabric.Compile(in)
		if err != nil {
			b.Fatal(err)
		}
		ds, err := render.RenderIntent(it)
		if err != nil {
			b.Fatal(err)
		}
		cs := lintConfigs(ds)
		if fs := lint.Check(cs, lint.Hooks{}); len(fs) > 0 {
			b.Fatalf("%s: the render breaks the lint: %v", nos, fs[0])
		}
		b.Run(nos+"/render", func(b *testing.B) {
			for b.Loop() {
				if _, err := render.RenderIntent(it); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(nos+"/lint", func(b *testing.B) {
			for b.Loop() {
				lint.Check(cs, lint.Hooks{})
			}
		})
	}
}
