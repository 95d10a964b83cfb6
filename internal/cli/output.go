package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// emit prints v as JSON or YAML when asked, else calls table.
func (g *globals) emit(v any, table func(w io.Writer)) error {
	switch g.output {
	case "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = g.stdout.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// row writes one tab-separated table row.
func row(w io.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
