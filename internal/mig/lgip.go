package mig

import (
	"math"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// LGIPRow is one GPU instance profile of one GPU as `nvidia-smi mig -lgip`
// reports it, so the node agent can compare reported profiles with the catalog.
type LGIPRow struct {
	GPU  int    `json:"gpu"`
	Name string `json:"name"` // short name without "MIG ", e.g. "1g.10gb+me"
	ID   int    `json:"id"`
	// Free and Total are the "Instances Free/Total" column: Total is the
	// profile's instance limit, Free how many more the current layout allows.
	Free      int     `json:"free"`
	Total     int     `json:"total"`
	MemoryGiB float64 `json:"memoryGiB"`
	P2P       bool    `json:"p2p"`
	SMs       int     `json:"sms"`
	DEC       int     `json:"dec"`
	ENC       int     `json:"enc"`
	// CE, JPEG and OFA come from the row's second line; -1 when the output has none.
	CE   int `json:"ce"`
	JPEG int `json:"jpeg"`
	OFA  int `json:"ofa"`
}

// ParseLGIP parses the table printed by `nvidia-smi mig -lgip`. Border,
// header and blank lines are skipped; a profile row that does not parse is an
// error naming its line, since a silently dropped profile would make the
// agent's comparison with the catalog wrong. Text without any profile row
// (e.g. "No MIG-enabled devices found.") yields no rows and no error.
func ParseLGIP(text string) ([]LGIPRow, error) {
	var rows []LGIPRow
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for n, line := range lines {
		cells, ok := tableCells(line)
		if !ok || len(cells) < 2 || cells[1] != "MIG" {
			continue
		}
		row, err := parseLGIPRow(cells)
		if err != nil {
			return nil, domain.Invalid("lgip", "line %d %q: %s", n+1, strings.TrimSpace(line), err.Message)
		}
		// The second line of a row holds CE, JPEG and OFA: three numbers only.
		if n+1 < len(lines) {
			if next, ok := tableCells(lines[n+1]); ok && len(next) == 3 {
				if v, ok := atois(next); ok {
					row.CE, row.JPEG, row.OFA = v[0], v[1], v[2]
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// tableCells returns the whitespace-separated fields of a "| ... |" line.
func tableCells(line string) ([]string, bool) {
	t := strings.TrimSpace(line)
	if len(t) < 2 || t[0] != '|' || t[len(t)-1] != '|' {
		return nil, false
	}
	return strings.Fields(t[1 : len(t)-1]), true
}

// parseLGIPRow parses "0 MIG 1g.10gb 19 7/7 9.75 No 16 1 0".
func parseLGIPRow(c []string) (LGIPRow, *domain.Error) {
	if len(c) != 10 {
		return LGIPRow{}, domain.Invalid("lgip", "a profile row has 10 columns (GPU, MIG, name, ID, free/total, memory, P2P, SM, DEC, ENC), got %d", len(c))
	}
	r := LGIPRow{Name: c[2], CE: -1, JPEG: -1, OFA: -1}
	var err *domain.Error
	num := func(col, s string) int {
		if err != nil {
			return 0
		}
		v, e := strconv.Atoi(s)
		if e != nil || v < 0 {
			err = domain.Invalid("lgip", "%s %q is not a non-negative integer", col, s)
		}
		return v
	}
	r.GPU = num("GPU", c[0])
	r.ID = num("ID", c[3])
	free, total, found := strings.Cut(c[4], "/")
	if !found {
		return LGIPRow{}, domain.Invalid("lgip", "instances %q is not free/total", c[4])
	}
	r.Free = num("free instances", free)
	r.Total = num("total instances", total)
	r.SMs = num("SM", c[7])
	r.DEC = num("DEC", c[8])
	r.ENC = num("ENC", c[9])
	if err != nil {
		return LGIPRow{}, err
	}
	if r.Free > r.Total {
		return LGIPRow{}, domain.Invalid("lgip", "instances %q: free exceeds total", c[4])
	}
	mem, e := strconv.ParseFloat(c[5], 64)
	if e != nil || !(mem >= 0) || math.IsInf(mem, 0) { // NaN and Inf parse as floats
		return LGIPRow{}, domain.Invalid("lgip", "memory %q is not a number of GiB", c[5])
	}
	r.MemoryGiB = mem
	switch c[6] {
	case "Yes":
		r.P2P = true
	case "No":
	default:
		return LGIPRow{}, domain.Invalid("lgip", "P2P %q is neither Yes nor No", c[6])
	}
	return r, nil
}

// atois parses counts: non-negative integers.
func atois(s []string) ([]int, bool) {
	out := make([]int, len(s))
	for i, x := range s {
		v, err := strconv.Atoi(x)
		if err != nil || v < 0 {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}
