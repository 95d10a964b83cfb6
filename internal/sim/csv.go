package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// bad is an invalid-input error naming the field, the value and the rule.
func bad(field, rule, format string, args ...any) *domain.Error {
	msg := fmt.Sprintf(format, args...)
	return &domain.Error{Code: domain.CodeInvalidArgument, Field: field, Message: msg,
		Details: []domain.Detail{{Field: field, Rule: rule, Message: msg}}}
}

// table is a CSV file read by column name.
type table struct {
	name string
	cols map[string]int
	rows [][]string
	line []int
}

// readTable reads a CSV with a header holding at least the required
// columns (any order, others ignored).
func readTable(name string, r io.Reader, required ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	head, err := cr.Read()
	if err == io.EOF {
		return nil, bad(name, "csv-header", "%s is empty: it needs a header line with %s", name, strings.Join(required, ","))
	}
	if err != nil {
		return nil, bad(name, "csv-syntax", "%s: %v", name, err)
	}
	t := &table{name: name, cols: map[string]int{}}
	for i, h := range head {
		t.cols[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range required {
		if _, ok := t.cols[c]; !ok {
			return nil, bad(name+".header", "csv-header", "%s: header %q lacks column %q (needs %s)", name, strings.Join(head, ","), c, strings.Join(required, ","))
		}
	}
	line := 1
	for {
		rec, err := cr.Read()
		line++
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad(name, "csv-syntax", "%s line %d: %v", name, line, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		t.rows = append(t.rows, rec)
		t.line = append(t.line, line)
	}
	return t, nil
}

func (t *table) str(i int, col string) string {
	k, ok := t.cols[col]
	if !ok || k >= len(t.rows[i]) {
		return ""
	}
	return strings.TrimSpace(t.rows[i][k])
}

// int64 parses an integer column (an empty cell is 0; a float with no
// fraction is accepted, as some exports write "8000.0").
func (t *table) int64(i int, col string, lo, hi int64) (int64, error) {
	s := t.str(i, col)
	if s == "" || s == "nan" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, bad(fmt.Sprintf("%s[line %d].%s", t.name, t.line[i], col), "integer", "%s line %d: %s %q is not an integer", t.name, t.line[i], col, s)
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, bad(fmt.Sprintf("%s[line %d].%s", t.name, t.line[i], col), "range", "%s line %d: %s is %d; it must be between %d and %d", t.name, t.line[i], col, v, lo, hi)
	}
	return v, nil
}
