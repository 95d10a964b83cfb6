package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The openb workloads split for judging a placement policy: it is chosen
// on the development set and then reported on both; the check set is
// never used to choose. The split alternates through the families of the
// published file (cpu, gpushare, gpuspec, multigpu) so each set holds
// every kind of workload.
var (
	OpenbDevWorkloads   = []string{"cpu050", "cpu200", "default", "gpushare40", "gpushare80", "gpuspec10", "gpuspec25", "multigpu20", "multigpu40"}
	OpenbCheckWorkloads = []string{"cpu100", "cpu250", "gpushare100", "gpushare60", "gpuspec20", "gpuspec33", "multigpu30", "multigpu50"}
)

// OpenbSet names the set of a workload ("dev", "check" or "").
func OpenbSet(workload string) string {
	w := short(workload)
	for _, d := range OpenbDevWorkloads {
		if d == w {
			return "dev"
		}
	}
	for _, c := range OpenbCheckWorkloads {
		if c == w {
			return "check"
		}
	}
	return ""
}

// curveMean is the mean allocation over the columns 0..130 that have one.
func curveMean(a [131]float64) float64 {
	var s float64
	n := 0
	for _, v := range a {
		if !math.IsNaN(v) {
			s += v
			n++
		}
	}
	return s / float64(max(n, 1))
}

// multiGPU reports whether a size (SizeOf) is two or more whole GPUs.
func multiGPU(size string) bool { return size != "cpu" && size != "share" && size != "1" }

// Seeds are split the same way: a rule is chosen on the development
// workloads with the development seeds only.
var (
	OpenbDevSeeds   = [2]int64{42, 46}
	OpenbCheckSeeds = [2]int64{47, 51}
)

// OpenbSeedSet names the set of a seed ("dev", "check" or "").
func OpenbSeedSet(seed int64) string {
	switch {
	case seed >= OpenbDevSeeds[0] && seed <= OpenbDevSeeds[1]:
		return "dev"
	case seed >= OpenbCheckSeeds[0] && seed <= OpenbCheckSeeds[1]:
		return "check"
	}
	return ""
}

// seedMeanCurve averages the rows of one workload and policy column by
// column.
func seedMeanCurve(rows []AllocRow, w, p string) ([131]float64, int) {
	return seedMeanCurveOf(rows, w, p, nil)
}

// seedMeanCurveOf is seedMeanCurve over the seeds keep accepts (nil: all).
func seedMeanCurveOf(rows []AllocRow, w, p string, keep func(int64) bool) ([131]float64, int) {
	var acc [131]float64
	var cnt [131]int
	n := 0
	for _, r := range rows {
		if r.Workload != w || r.Policy != p || (keep != nil && !keep(r.Seed)) {
			continue
		}
		n++
		for x, v := range r.Alloc {
			if !math.IsNaN(v) {
				acc[x] += v
				cnt[x]++
			}
		}
	}
	for x := range acc {
		if cnt[x] == 0 {
			acc[x] = math.NaN()
		} else {
			acc[x] /= float64(cnt[x])
		}
	}
	return acc, n
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// curveSection judges jobfabric on the whole curve against FGD and
// BestFit: per workload (seed means) the mean over columns 0..130, the
// worst column margin against the better baseline, multi-GPU placement,
// 8-GPU pods' first refusal, and the 130 % column; then each set's tally
// of the targets, the per-size placement rates and the plots.
func curveSection(b *strings.Builder, rep *Report, rows []AllocRow, runs []*OpenbResult, workloads []string) {
	const jf, fgd, bf = "07-JobFabric", "06-FGD", "05-BestFit"
	type verdict struct{ column, mean, multi, end bool }
	tally := map[string][]verdict{}
	b.WriteString("\n## The whole curve: jobfabric against FGD and BestFit\n\n")
	b.WriteString("Seed means per workload. *worst* is the lowest, over columns 0..130, of jobfabric minus the better of FGD and BestFit in that column (target: >= -0.10), *below* the number of columns under -0.10; *mean* is over columns 0..130 (target: above FGD); *multi-GPU placed* sums the pods of 2 or more GPUs over seeds (target: at least FGD's); *8-GPU refused from* is the median over seeds of the arrived demand at the first 8-GPU pod turned away (none: -); *130 %* is jobfabric minus FGD in the last column (target: > 0). Sets: ")
	fmt.Fprintf(b, "dev = %s; check = %s.\n\n", strings.Join(OpenbDevWorkloads, ", "), strings.Join(OpenbCheckWorkloads, ", "))
	b.WriteString("| workload | set | mean jobfabric | mean FGD | mean BestFit | worst (at column) | below | multi-GPU placed jobfabric / FGD | 8-GPU refused from jobfabric / FGD | 130 % jobfabric - FGD |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var margins []Series
	for _, w := range workloads {
		cj, n1 := seedMeanCurve(rows, w, jf)
		cf, n2 := seedMeanCurve(rows, w, fgd)
		cb, n3 := seedMeanCurve(rows, w, bf)
		if n1 == 0 || n2 == 0 || n3 == 0 {
			continue
		}
		worst, at, below := math.Inf(1), 0, 0
		m := Series{Name: short(w)}
		for x := 0; x <= 130; x++ {
			d := cj[x] - math.Max(cf[x], cb[x])
			m.X = append(m.X, float64(x))
			m.Y = append(m.Y, d)
			if math.IsNaN(d) {
				continue
			}
			if d < worst {
				worst, at = d, x
			}
			if d < -0.1-1e-9 {
				below++
			}
		}
		margins = append(margins, m)
		placed := map[string][2]int{}
		first := map[string][]float64{}
		for _, r := range runs {
			if r.Workload != w || (r.Label != jf && r.Label != fgd) {
				continue
			}
			p := placed[r.Label]
			for k, c := range r.Sizes {
				if multiGPU(k) {
					p[0] += c.Placed
					p[1] += c.Arrived
				}
			}
			placed[r.Label] = p
			if c := r.Sizes["8"]; c != nil && c.FirstFail >= 0 {
				first[r.Label] = append(first[r.Label], c.FirstFail)
			}
		}
		rate := func(l string) float64 { return 100 * float64(placed[l][0]) / float64(max(placed[l][1], 1)) }
		multi := "-"
		if placed[jf][1] > 0 || placed[fgd][1] > 0 {
			multi = fmt.Sprintf("%.1f %% / %.1f %%", rate(jf), rate(fgd))
		}
		ff := func(l string) string {
			if len(first[l]) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f %%", median(first[l]))
		}
		mj, mf, mb := curveMean(cj), curveMean(cf), curveMean(cb)
		set := OpenbSet(w)
		fmt.Fprintf(b, "| %s | %s | %.3f | %.3f | %.3f | %+.2f (%d) | %d | %s | %s / %s | %+.2f |\n",
			short(w), set, mj, mf, mb, worst, at, below, multi, ff(jf), ff(fgd), cj[130]-cf[130])
		tally[set] = append(tally[set], verdict{below == 0, mj > mf, placed[jf][1] == 0 || rate(jf) >= rate(fgd), cj[130] > cf[130]})
	}
	for _, set := range []string{"dev", "check", ""} {
		vs := tally[set]
		if len(vs) == 0 {
			continue
		}
		var c, m, mg, e int
		for _, v := range vs {
			if v.column {
				c++
			}
			if v.mean {
				m++
			}
			if v.multi {
				mg++
			}
			if v.end {
				e++
			}
		}
		name := set
		if name == "" {
			name = "other"
		}
		fmt.Fprintf(b, "\n%s set (%d workloads): every column within 0.1 of the better baseline on %d; mean above FGD on %d; multi-GPU placed at least as often as FGD on %d; ahead of FGD at 130 %% on %d.\n", name, len(vs), c, m, mg, e)
	}
	if len(margins) > 0 {
		rep.Files["openb-curve-margin.svg"] = LineChart("openb: jobfabric minus the better of FGD and BestFit (seed means)", "arrived GPU demand (% of capacity)", "allocation margin (points)", margins, math.NaN(), math.NaN())
		b.WriteString("\n![jobfabric's margin over the better baseline, per workload](openb-curve-margin.svg)\n")
	}
	quadrantSection(b, rows, runs, workloads)
	sizeSection(b, rep, runs)
}

// targets is how jobfabric fares on one workload over some seeds: every
// column within 0.1 of the better baseline, mean above FGD's, multi-GPU
// pods placed at least as often as FGD, ahead of FGD at 130 %.
type targets struct{ column, mean, multi, end bool }

func (t targets) all() bool { return t.column && t.mean && t.multi && t.end }

// judge works out targets for workload w over the seeds keep accepts
// (seed means); ok is false without jobfabric, FGD and BestFit rows.
func judge(rows []AllocRow, runs []*OpenbResult, w string, keep func(int64) bool) (t targets, ok bool) {
	const jf, fgd, bf = "07-JobFabric", "06-FGD", "05-BestFit"
	cj, n1 := seedMeanCurveOf(rows, w, jf, keep)
	cf, n2 := seedMeanCurveOf(rows, w, fgd, keep)
	cb, n3 := seedMeanCurveOf(rows, w, bf, keep)
	if n1 == 0 || n2 == 0 || n3 == 0 {
		return t, false
	}
	t.column = true
	for x := 0; x <= 130; x++ {
		if d := cj[x] - math.Max(cf[x], cb[x]); d < -0.1-1e-9 {
			t.column = false
		}
	}
	var pj, aj, pf, af int
	for _, r := range runs {
		if r.Workload != w || (keep != nil && !keep(r.Seed)) {
			continue
		}
		for k, c := range r.Sizes {
			switch {
			case !multiGPU(k):
			case r.Label == jf:
				pj, aj = pj+c.Placed, aj+c.Arrived
			case r.Label == fgd:
				pf, af = pf+c.Placed, af+c.Arrived
			}
		}
	}
	t.mean = curveMean(cj) > curveMean(cf)
	t.multi = pj*max(af, 1) >= pf*max(aj, 1)
	t.end = cj[130] > cf[130]
	return t, true
}

// quadrantSection tallies the targets per set of workloads and set of
// seeds: the development quadrant is where rules were chosen, the other
// three are held out (workloads, seeds, or both).
func quadrantSection(b *strings.Builder, rows []AllocRow, runs []*OpenbResult, workloads []string) {
	type quad struct{ ws, ss string }
	var order []quad
	for _, ws := range []string{"dev", "check"} {
		for _, ss := range []string{"dev", "check"} {
			order = append(order, quad{ws, ss})
		}
	}
	b.WriteString("\n### Targets by set of workloads and set of seeds\n\n")
	fmt.Fprintf(b, "Seed sets: dev = %d-%d, check = %d-%d. Each cell counts the workloads of the set meeting the target on the seed means of the seed set.\n\n", OpenbDevSeeds[0], OpenbDevSeeds[1], OpenbCheckSeeds[0], OpenbCheckSeeds[1])
	b.WriteString("| workloads | seeds | workloads | every column within 0.1 | mean above FGD | multi-GPU at least FGD's | ahead at 130 % | all four | missed |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, q := range order {
		keep := func(seed int64) bool { return OpenbSeedSet(seed) == q.ss }
		var n, c, m, mg, e, all int
		var missed []string
		for _, w := range workloads {
			if OpenbSet(w) != q.ws {
				continue
			}
			t, ok := judge(rows, runs, w, keep)
			if !ok {
				continue
			}
			n++
			c, m, mg, e = c+b2i(t.column), m+b2i(t.mean), mg+b2i(t.multi), e+b2i(t.end)
			if t.all() {
				all++
			} else {
				var what []string
				for _, x := range []struct {
					ok   bool
					name string
				}{{t.column, "column"}, {t.mean, "mean"}, {t.multi, "multi"}, {t.end, "130"}} {
					if !x.ok {
						what = append(what, x.name)
					}
				}
				missed = append(missed, short(w)+" ("+strings.Join(what, ", ")+")")
			}
		}
		if n == 0 {
			continue
		}
		miss := "-"
		if len(missed) > 0 {
			miss = strings.Join(missed, "; ")
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %d | %d | %s |\n", q.ws, q.ss, n, c, m, mg, e, all, miss)
	}
}

func b2i(x bool) int {
	if x {
		return 1
	}
	return 0
}

// sizeSection tabulates, per policy, the share of pods of each size placed
// over every run, and plots it.
func sizeSection(b *strings.Builder, rep *Report, runs []*OpenbResult) {
	sizes := []string{"cpu", "share", "1", "2", "4", "8"}
	placed := map[string]map[string][2]int{}
	var labels []string
	for _, r := range runs {
		if len(r.Sizes) == 0 {
			continue
		}
		if placed[r.Label] == nil {
			placed[r.Label] = map[string][2]int{}
			labels = append(labels, r.Label)
		}
		for k, c := range r.Sizes {
			p := placed[r.Label][k]
			placed[r.Label][k] = [2]int{p[0] + c.Placed, p[1] + c.Arrived}
		}
	}
	if len(labels) == 0 {
		return
	}
	sort.Strings(labels)
	b.WriteString("\n### Pods placed by size (every workload and seed)\n\n| policy | " + strings.Join(sizes, " | ") + " |\n|---|" + strings.Repeat("---|", len(sizes)) + "\n")
	var ss []Series
	for _, l := range labels {
		s := Series{Name: l}
		b.WriteString("| " + l)
		for _, k := range sizes {
			p := placed[l][k]
			v := math.NaN()
			if p[1] > 0 {
				v = 100 * float64(p[0]) / float64(p[1])
				fmt.Fprintf(b, " | %.1f %%", v)
			} else {
				b.WriteString(" | -")
			}
			s.Y = append(s.Y, v)
		}
		b.WriteString(" |\n")
		ss = append(ss, s)
	}
	rep.Files["openb-placed-by-size.svg"] = BarChart("openb: pods placed by size (all workloads and seeds)", "placed (%)", sizes, ss, 0, 100)
	b.WriteString("\n![pods placed by size](openb-placed-by-size.svg)\n")
}
