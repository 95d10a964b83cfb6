package sim

import (
	"fmt"
	"math"
	"strings"
)

// Series is one line of a chart.
type Series struct {
	Name string
	X, Y []float64
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// niceRange widens [lo, hi] to round ticks.
func niceRange(lo, hi float64) (float64, float64, float64) {
	if hi <= lo {
		hi = lo + 1
	}
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step, step
}

// LineChart renders series as an SVG line chart.
func LineChart(title, xlabel, ylabel string, series []Series, ymin, ymax float64) string {
	const W, H, L, R, T, B = 720, 420, 60, 170, 40, 50
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for i := range s.X {
			if math.IsNaN(s.Y[i]) {
				continue
			}
			xlo, xhi = math.Min(xlo, s.X[i]), math.Max(xhi, s.X[i])
			ylo, yhi = math.Min(ylo, s.Y[i]), math.Max(yhi, s.Y[i])
		}
	}
	if math.IsInf(xlo, 0) {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	if !math.IsNaN(ymin) {
		ylo = ymin
	}
	if !math.IsNaN(ymax) {
		yhi = ymax
	}
	xlo, xhi, xs := niceRange(xlo, xhi)
	ylo, yhi, ys := niceRange(ylo, yhi)
	px := func(x float64) float64 { return L + (x-xlo)/(xhi-xlo)*(W-L-R) }
	py := func(y float64) float64 { return H - B - (y-ylo)/(yhi-ylo)*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">%s</text>`+"\n", L, esc(title))
	for x := xlo; x <= xhi+xs/2; x += xs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", px(x), T, px(x), H-B, px(x), H-B+16, roundTick(x))
	}
	for y := ylo; y <= yhi+ys/2; y += ys {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", L, py(y), W-R, py(y), L-6, py(y)+4, roundTick(y))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (L+W-R)/2, H-12, esc(xlabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", (T+H-B)/2, (T+H-B)/2, esc(ylabel))
	for i, s := range series {
		c := palette[i%len(palette)]
		// Past the palette, colours repeat with a dash pattern.
		dash := [...]string{"", ` stroke-dasharray="6 3"`, ` stroke-dasharray="2 2"`}[min(i/len(palette), 2)]
		var pts []string
		for k := range s.X {
			if !math.IsNaN(s.Y[k]) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[k]), py(math.Max(ylo, math.Min(yhi, s.Y[k])))))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d">%s</text>`+"\n", W-R+10, T+10+18*i, W-R+30, T+10+18*i, c, dash, W-R+36, T+14+18*i, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func roundTick(v float64) float64 { return math.Round(v*1000) / 1000 }

// BarChart renders groups of bars (one bar per series in each group).
func BarChart(title, ylabel string, groups []string, series []Series, ymin, ymax float64) string {
	const W, H, L, R, T, B = 860, 420, 60, 150, 40, 110
	ylo, yhi, ys := niceRange(ymin, ymax)
	py := func(y float64) float64 { return H - B - (math.Max(ylo, math.Min(yhi, y))-ylo)/(yhi-ylo)*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">%s</text>`+"\n", L, esc(title))
	for y := ylo; y <= yhi+ys/2; y += ys {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", L, py(y), W-R, py(y), L-6, py(y)+4, roundTick(y))
	}
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", (T+H-B)/2, (T+H-B)/2, esc(ylabel))
	gw := float64(W-L-R) / float64(max(1, len(groups)))
	bw := gw * 0.8 / float64(max(1, len(series)))
	for gi, g := range groups {
		x0 := float64(L) + gw*float64(gi) + gw*0.1
		for si, s := range series {
			if gi >= len(s.Y) || math.IsNaN(s.Y[gi]) {
				continue
			}
			y := py(s.Y[gi])
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.2f</title></rect>`+"\n", x0+bw*float64(si), y, bw, float64(H-B)-y, palette[si%len(palette)], esc(g), esc(s.Name), s.Y[gi])
		}
		cx := x0 + gw*0.4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-45 %.1f %d)">%s</text>`+"\n", cx, H-B+14, cx, H-B+14, esc(g))
	}
	for si, s := range series {
		c := palette[si%len(palette)]
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", W-R+10, T+4+18*si, c, W-R+30, T+14+18*si, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
