package usage

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCompute: a 30-day report over 100,000 jobs that ran in it (one
// run each, a tenth requeued once) across 50 tenants, 4 workspaces each,
// 1,000 tokens. job-page is the API's first page by job (500 rows): what
// GET /v1/usage holds the read lock for now.
func BenchmarkCompute(b *testing.B) {
	const n = 100_000
	js := make(jobs, n)
	for i := range js {
		start := time.Duration(i) * 25 * time.Second // spread over 29 days
		j := job(uint64(i+1), fmt.Sprintf("t%d/w%d", i%50, i%200/50), fmt.Sprintf("member:tok%d", i%1000)).run(start, start+time.Hour, 8, 8*u, (i%3)*u)
		if i%10 == 0 {
			j.run(start+2*time.Hour, start+3*time.Hour, 8, 8*u, 0)
		}
		js[i] = j.ended(start + 3*time.Hour).obj()
	}
	for _, by := range Bys {
		b.Run(string(by), func(b *testing.B) {
			q := Query{Since: t0.Add(-time.Hour), Until: t0.Add(30 * 24 * time.Hour), Now: t0.Add(30 * 24 * time.Hour), By: by}
			for b.Loop() {
				if _, err := Compute(js, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("job-page", func(b *testing.B) {
		q := Query{Since: t0.Add(-time.Hour), Until: t0.Add(30 * 24 * time.Hour), Now: t0.Add(30 * 24 * time.Hour), By: ByJob, Limit: 500}
		for b.Loop() {
			if rep, err := Compute(js, q); err != nil || len(rep.Rows) != 500 || !rep.More {
				b.Fatal(len(rep.Rows), err)
			}
		}
	})
}
