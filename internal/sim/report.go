package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Report is a Markdown summary and the files (SVG plots) it links to.
type Report struct {
	Markdown string
	Files    map[string]string // name -> content
}

func short(w string) string { return strings.TrimPrefix(w, "openb_pod_list_") }

// OpenbReport compares openb runs (rows of our CSV, with the runs' summary
// for speed and fragmentation) with the published results (may be nil).
func OpenbReport(rows []AllocRow, runs []*OpenbResult, expected []AllocRow) Report {
	rep := Report{Files: map[string]string{}}
	var b strings.Builder
	mean := func(rs []AllocRow) map[[2]string]Mean {
		m := map[[2]string]Mean{}
		for _, x := range Means(rs, 130) {
			m[[2]string{x.Workload, x.Policy}] = x
		}
		return m
	}
	ours, pub := mean(rows), mean(expected)
	var workloads []string
	seenW := map[string]bool{}
	var labels []string
	seenP := map[string]bool{}
	for _, r := range rows {
		if !seenW[r.Workload] {
			seenW[r.Workload] = true
			workloads = append(workloads, r.Workload)
		}
		if !seenP[r.Policy] {
			seenP[r.Policy] = true
			labels = append(labels, r.Policy)
		}
	}
	sort.Strings(workloads)
	sort.Strings(labels)
	cell := func(m map[[2]string]Mean, w, p string) string {
		if x, ok := m[[2]string{w, p}]; ok {
			return fmt.Sprintf("%.2f", x.Value)
		}
		return "-"
	}
	b.WriteString("## openb: GPU allocation at 130 % arrived demand\n\n")
	b.WriteString("Mean over seeds of the allocated share of GPU capacity (milli-GPU) once demand reaches 130 % of it.\n\n")
	b.WriteString("| workload | " + strings.Join(labels, " | ") + " |\n|---|" + strings.Repeat("---|", len(labels)) + "\n")
	for _, w := range workloads {
		b.WriteString("| " + short(w))
		for _, p := range labels {
			b.WriteString(" | " + cell(ours, w, p))
		}
		b.WriteString(" |\n")
	}
	// Validation against the paper.
	if len(expected) > 0 {
		b.WriteString("\n### Validation against the published results (10-seed means at 130 %)\n\n")
		b.WriteString("| workload | BestFit ours | BestFit published | diff | FGD ours | FGD published | diff |\n|---|---|---|---|---|---|---|\n")
		worst := 0.0
		n := 0
		for _, w := range workloads {
			line := "| " + short(w)
			ok := false
			for _, p := range []string{"05-BestFit", "06-FGD"} {
				o, ok1 := ours[[2]string{w, p}]
				e, ok2 := pub[[2]string{w, p}]
				if ok1 && ok2 {
					d := o.Value - e.Value
					worst = math.Max(worst, math.Abs(d))
					line += fmt.Sprintf(" | %.2f | %.2f | %+.2f", o.Value, e.Value, d)
					ok = true
				} else {
					line += " | " + cell(ours, w, p) + " | " + cell(pub, w, p) + " | -"
				}
			}
			if ok {
				n++
				b.WriteString(line + " |\n")
			}
		}
		fmt.Fprintf(&b, "\nLargest gap over %d workloads: %.2f points.\n", n, worst)
	}
	// Ours against FGD.
	frag := map[[2]string][]float64{}
	secs := map[string][]float64{}
	dps := map[string][]float64{}
	for _, r := range runs {
		k := [2]string{r.Workload, r.Label}
		frag[k] = append(frag[k], r.FragRatio)
		secs[r.Label] = append(secs[r.Label], r.Seconds)
		dps[r.Label] = append(dps[r.Label], r.DecisionsPerSec)
	}
	if seenP["07-JobFabric"] && seenP["06-FGD"] {
		b.WriteString("\n### jobfabric against FGD\n\n")
		b.WriteString("| workload | jobfabric | FGD | FGD published | jobfabric - FGD | frag ratio jobfabric % | frag ratio FGD % |\n|---|---|---|---|---|---|---|\n")
		wins := 0
		for _, w := range workloads {
			o, ok1 := ours[[2]string{w, "07-JobFabric"}]
			f, ok2 := ours[[2]string{w, "06-FGD"}]
			if !ok1 || !ok2 {
				continue
			}
			if o.Value >= f.Value {
				wins++
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %+.2f | %.1f | %.1f |\n", short(w), o.Value, f.Value, cell(pub, w, "06-FGD"), o.Value-f.Value,
				mean1(frag[[2]string{w, "07-JobFabric"}]), mean1(frag[[2]string{w, "06-FGD"}]))
		}
		fmt.Fprintf(&b, "\njobfabric reaches at least FGD's allocation on %d of %d workloads. The fragmentation ratio is the share of idle GPU capacity, at the end of the run, that the trace's typical pods could not use.\n", wins, len(workloads))
	}
	if len(secs) > 0 {
		b.WriteString("\n### Speed\n\n| policy | seconds per run (mean) | decisions/s (mean) |\n|---|---|---|\n")
		for _, p := range labels {
			fmt.Fprintf(&b, "| %s | %.2f | %.0f |\n", p, mean1(secs[p]), mean1(dps[p]))
		}
	}
	// Plots: curves of the first workload (default if present), bars.
	curveW := ""
	for _, w := range workloads {
		if short(w) == "default" {
			curveW = w
		}
	}
	if curveW == "" && len(workloads) > 0 {
		curveW = workloads[0]
	}
	if curveW != "" {
		var ss []Series
		for _, p := range labels {
			var acc [131]float64
			var cnt [131]int
			for _, r := range rows {
				if r.Workload == curveW && r.Policy == p {
					for x, v := range r.Alloc {
						if !math.IsNaN(v) {
							acc[x] += v
							cnt[x]++
						}
					}
				}
			}
			s := Series{Name: p}
			for x := 0; x <= 130; x++ {
				s.X = append(s.X, float64(x))
				if cnt[x] > 0 {
					s.Y = append(s.Y, acc[x]/float64(cnt[x]))
				} else {
					s.Y = append(s.Y, math.NaN())
				}
			}
			ss = append(ss, s)
		}
		name := "openb-alloc-" + short(curveW) + ".svg"
		rep.Files[name] = LineChart("openb "+short(curveW)+": GPU allocated vs arrived demand (seed mean)", "arrived GPU demand (% of capacity)", "GPU allocated (%)", ss, 70, 100)
		fmt.Fprintf(&b, "\n![allocation curve](%s)\n", name)
		// Zoom on the end.
		var zs []Series
		for _, s := range ss {
			zs = append(zs, Series{Name: s.Name, X: s.X[90:], Y: s.Y[90:]})
		}
		zname := "openb-alloc-" + short(curveW) + "-zoom.svg"
		rep.Files[zname] = LineChart("openb "+short(curveW)+": 90-130 % arrived demand", "arrived GPU demand (% of capacity)", "GPU allocated (%)", zs, math.NaN(), math.NaN())
		fmt.Fprintf(&b, "\n![allocation curve, end of run](%s)\n", zname)
	}
	if len(workloads) > 0 {
		var groups []string
		for _, w := range workloads {
			groups = append(groups, short(w))
		}
		var ss []Series
		lo := 100.0
		for _, p := range labels {
			s := Series{Name: p}
			for _, w := range workloads {
				v := math.NaN()
				if x, ok := ours[[2]string{w, p}]; ok {
					v = x.Value
					lo = math.Min(lo, v)
				}
				s.Y = append(s.Y, v)
			}
			ss = append(ss, s)
		}
		rep.Files["openb-alloc-130.svg"] = BarChart("openb: GPU allocated at 130 % arrived demand (seed mean)", "GPU allocated (%)", groups, ss, math.Floor(lo-1), 100)
		b.WriteString("\n![allocation at 130 %](openb-alloc-130.svg)\n")
	}
	if seenP["07-JobFabric"] && seenP["06-FGD"] && seenP["05-BestFit"] {
		curveSection(&b, &rep, rows, runs, workloads)
	}
	rep.Markdown = b.String()
	return rep
}

func mean1(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return mean(xs)
}

// JobsReport summarises job-trace replays.
func JobsReport(sum JobsSummary) Report {
	rep := Report{Files: map[string]string{}}
	var b strings.Builder
	fmt.Fprintf(&b, "## Job traces: %s on a %s pool\n\n", strings.Join(shortPaths(sum.Traces), ", "), sum.Cluster)
	b.WriteString("| metric |")
	for _, r := range sum.Runs {
		b.WriteString(" " + r.Policy + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(sum.Runs)) + "\n")
	for _, m := range jobsMetrics {
		b.WriteString("| " + m.name + " |")
		for _, r := range sum.Runs {
			b.WriteString(" " + m.f(r) + " |")
		}
		b.WriteString("\n")
	}
	if len(sum.Runs) > 0 {
		b.WriteString("\nPer tenant (p90 concurrent demand, guarantee; quota attainment % and borrowed GPU-hours per policy):\n\n| tenant | p90 | guarantee |")
		for _, r := range sum.Runs {
			fmt.Fprintf(&b, " %s attainment | %s borrowed |", r.Policy, r.Policy)
		}
		b.WriteString("\n|---|---|---|" + strings.Repeat("---|---|", len(sum.Runs)) + "\n")
		for i, t := range sum.Runs[0].Tenants {
			fmt.Fprintf(&b, "| %s | %d | %d |", t.Name, t.P90Demand, t.Guaranteed)
			for _, r := range sum.Runs {
				if i < len(r.Tenants) {
					fmt.Fprintf(&b, " %.1f | %.0f |", r.Tenants[i].Attainment, r.Tenants[i].Borrowed)
				}
			}
			b.WriteString("\n")
		}
		var ss []Series
		for _, r := range sum.Runs {
			s := Series{Name: r.Policy}
			// Daily means keep the plot readable.
			for d := 0; d*24 < len(r.UtilizationSer); d++ {
				s.X = append(s.X, float64(d))
				s.Y = append(s.Y, mean(r.UtilizationSer[d*24:min(len(r.UtilizationSer), d*24+24)]))
			}
			ss = append(ss, s)
		}
		name := "jobs-utilization.svg"
		rep.Files[name] = LineChart("GPU allocated per day, "+sum.Cluster+" pool", "day", "GPU allocated (%)", ss, 0, 100)
		fmt.Fprintf(&b, "\n![utilization](%s)\n", name)
	}
	rep.Markdown = b.String()
	return rep
}

func shortPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = WorkloadName(p)
	}
	return out
}
