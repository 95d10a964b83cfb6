package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// AllocRow is one row of an analysis_allo_discrete.csv file.
type AllocRow struct {
	Workload, Policy string // workload without the openb_pod_list_ prefix kept as written
	Tune             float64
	Seed             int64
	TotalGPUs        int
	Alloc            [131]float64 // NaN when empty
}

// ReadAllocCSV reads a file in the FGD paper's analysis_allo_discrete.csv
// layout (ours or the published one).
func ReadAllocCSV(name string, r io.Reader) ([]AllocRow, error) {
	cols := []string{"workload", "sc_policy", "tune", "seed", "total_gpus", "130"}
	t, err := readTable(name, r, cols...)
	if err != nil {
		return nil, err
	}
	out := make([]AllocRow, 0, len(t.rows))
	for i := range t.rows {
		row := AllocRow{Workload: t.str(i, "workload"), Policy: t.str(i, "sc_policy")}
		tune, err := strconv.ParseFloat(t.str(i, "tune"), 64)
		if err != nil {
			return nil, bad(fmt.Sprintf("%s[line %d].tune", name, t.line[i]), "number", "%s line %d: tune %q is not a number", name, t.line[i], t.str(i, "tune"))
		}
		row.Tune = tune
		if row.Seed, err = t.int64(i, "seed", math.MinInt64, math.MaxInt64); err != nil {
			return nil, err
		}
		g, err := t.int64(i, "total_gpus", 0, 1<<31)
		if err != nil {
			return nil, err
		}
		row.TotalGPUs = int(g)
		for x := 0; x <= 130; x++ {
			s := t.str(i, strconv.Itoa(x))
			if s == "" {
				row.Alloc[x] = math.NaN()
				continue
			}
			if row.Alloc[x], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, bad(fmt.Sprintf("%s[line %d].%d", name, t.line[i], x), "number", "%s line %d: column %d %q is not a number", name, t.line[i], x, s)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// Rows turns results into AllocRows.
func Rows(runs []*OpenbResult) []AllocRow {
	out := make([]AllocRow, len(runs))
	for i, r := range runs {
		out[i] = AllocRow{Workload: r.Workload, Policy: r.Label, Tune: r.Tune, Seed: r.Seed, TotalGPUs: r.TotalGPUs, Alloc: r.Alloc}
	}
	return out
}

// Mean is the mean of column x over the rows of one workload and policy,
// and how many rows had it.
type Mean struct {
	Workload, Policy string
	Value            float64
	N                int
}

// Means averages column x per (workload, policy), sorted.
func Means(rows []AllocRow, x int) []Mean {
	type k struct{ w, p string }
	sum := map[k]float64{}
	n := map[k]int{}
	for _, r := range rows {
		if math.IsNaN(r.Alloc[x]) {
			continue
		}
		sum[k{r.Workload, r.Policy}] += r.Alloc[x]
		n[k{r.Workload, r.Policy}]++
	}
	var out []Mean
	for key, s := range sum {
		out = append(out, Mean{key.w, key.p, s / float64(n[key]), n[key]})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Workload != out[b].Workload {
			return out[a].Workload < out[b].Workload
		}
		return out[a].Policy < out[b].Policy
	})
	return out
}

// OpenbSummary is what `sim openb` writes to runs.json beside the CSV.
type OpenbSummary struct {
	Kind  string         `json:"kind"` // "openb"
	Nodes string         `json:"nodes"`
	Pods  []string       `json:"pods"`
	Tune  float64        `json:"tune"`
	Runs  []*OpenbResult `json:"runs"`
}

// WriteJSON writes v indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
