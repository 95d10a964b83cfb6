package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// printing is how a command prints: the -o format, --no-headers, and the
// clock and zone that times and ages are shown in (injected by tests; the
// zero value is the wall clock and the local zone, TZ honoured).
type printing struct {
	output    string
	noHeaders bool
	now       func() time.Time
	loc       *time.Location
	poll      time.Duration      // how often a watch polls (0: defaultPoll)
	jsonPath  *jsonpath.JSONPath // parsed from -o jsonpath=TEMPLATE by checkOutput
	allowCSV  bool               // the command prints -o csv itself (usage)
}

// timeLayout is the one format of a point in time in tables and lines: the
// local zone, and its name, so that a time read off a screen is unambiguous.
const timeLayout = "2006-01-02 15:04:05 MST"

func (p *printing) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// when renders a point in time in the local zone with the zone shown.
func (p *printing) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	loc := p.loc
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format(timeLayout)
}

// whenPtr is when for an optional time.
func (p *printing) whenPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return p.when(*t)
}

// age is how long ago t was, as kubectl's AGE column shows it.
func (p *printing) age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return humanDuration(p.clock().Sub(t))
}

// humanDuration renders d coarsely: two units at most, the smaller one
// dropped once it no longer matters (45s, 3m20s, 45m, 5h3m, 30h, 3d4h, 12d).
func humanDuration(d time.Duration) string {
	if d < 0 {
		// A clock behind the server's: the event is "now", not in the future.
		d = 0
	}
	s := int64(d / time.Second)
	m, h, days := s/60, s/3600, s/86400
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s%60)
	case h < 3:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		if m%60 == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m%60)
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case days < 8:
		if h%24 == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h%24)
	case days < 730:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dy%dd", days/365, days%365)
}

// checkOutput validates -o before anything is sent, parsing a jsonpath
// template once.
func (g *globals) checkOutput() error {
	if tmpl, ok := strings.CutPrefix(g.output, "jsonpath="); ok {
		tmpl = strings.Trim(tmpl, `'"`)
		if !strings.Contains(tmpl, "{") {
			tmpl = "{" + tmpl + "}" // kubectl's relaxed form: -o jsonpath=.name
		}
		jp := jsonpath.New("output").AllowMissingKeys(true)
		if err := jp.Parse(tmpl); err != nil {
			return domain.Invalid("output", "-o %s: not a JSONPath template: %v", g.output, err)
		}
		g.jsonPath = jp
		return nil
	}
	switch g.output {
	case "table", "wide", "json", "yaml", "name":
		return nil
	case "csv":
		if g.allowCSV {
			return nil
		}
		return domain.Invalid("output", "-o csv: only jobfabric usage prints csv; use -o json or -o jsonpath=...")
	}
	return domain.Invalid("output", "-o %q is not one of table, wide, json, yaml, name, jsonpath=TEMPLATE (csv: usage)", g.output)
}

// tableWriter is what a table function writes to: aligned columns, and
// whether headers are wanted and wide columns asked for.
type tableWriter struct {
	io.Writer
	wide, noHeaders bool
}

// emit prints v in the -o format; table renders the table and wide form.
func (g *globals) emit(v any, table func(w io.Writer)) error {
	if err := g.checkOutput(); err != nil {
		return err
	}
	switch {
	case g.output == "json":
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case g.output == "yaml":
		b, err := orderedYAML(v)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(b)
		return err
	case g.jsonPath != nil:
		return g.printJSONPath(v)
	case g.output == "name":
		ns, err := names(v)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if _, err := fmt.Fprintln(g.stdout, n); err != nil {
				return err
			}
		}
		return nil
	}
	if table == nil {
		return domain.Invalid("output", "-o %s: this command prints only json or yaml", g.output)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	table(&tableWriter{Writer: tw, wide: g.output == "wide", noHeaders: g.noHeaders})
	return tw.Flush()
}

// printJSONPath applies the template to v's JSON form, as -o json prints it
// (a list is an array: -o 'jsonpath={[*].id}').
func (g *globals) printJSONPath(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	var buf bytes.Buffer
	if err := g.jsonPath.Execute(&buf, data); err != nil {
		return domain.Invalid("output", "-o %s: %v", g.output, err)
	}
	if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
		buf.WriteByte('\n')
	}
	_, err = g.stdout.Write(buf.Bytes())
	return err
}

// row writes one tab-separated table row.
func row(w io.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// header writes a table's column names, unless --no-headers.
func header(w io.Writer, cols ...any) {
	if tw, ok := w.(*tableWriter); ok && tw.noHeaders {
		return
	}
	row(w, cols...)
}

// title writes a line above or between tables (a summary, a section name),
// left out with --no-headers so that only rows remain.
func title(w io.Writer, format string, args ...any) {
	if tw, ok := w.(*tableWriter); ok && tw.noHeaders {
		return
	}
	fmt.Fprintf(w, format, args...)
}

// isWide reports whether -o wide asked for the extra columns.
func isWide(w io.Writer) bool {
	tw, ok := w.(*tableWriter)
	return ok && tw.wide
}

// wideCols returns cols, and extra after them with -o wide.
func wideCols(w io.Writer, cols []any, extra ...any) []any {
	if isWide(w) {
		return append(cols, extra...)
	}
	return cols
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// names renders v for -o name: KIND/ID per object, as kubectl does, a list
// one line per element.
func names(v any) ([]string, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Slice {
		out := []string{}
		for i := 0; i < rv.Len(); i++ {
			ns, err := names(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			out = append(out, ns...)
		}
		return out, nil
	}
	if !rv.IsValid() {
		return nil, nil
	}
	switch x := rv.Interface().(type) {
	case named:
		return x.names(), nil
	case domain.Job:
		return []string{"job/" + strconv.FormatUint(x.ID, 10)}, nil
	case domain.Tenant:
		return []string{"tenant/" + x.Name}, nil
	case domain.Workspace:
		return []string{"workspace/" + x.Ref()}, nil
	case domain.Token:
		return []string{"token/" + x.ID}, nil
	case api.TokenCreated:
		return []string{"token/" + x.Token.ID}, nil
	case domain.HostStatus:
		return []string{"host/" + x.Node}, nil
	case domain.NodeView:
		return []string{"node/" + x.Name}, nil
	case domain.NodeCondition:
		return []string{"node/" + x.Server}, nil
	case api.Pool:
		return []string{"pool/" + x.Name}, nil
	case domain.Event:
		return []string{"event/" + strconv.FormatUint(x.Seq, 10)}, nil
	case api.RevisionInfo:
		return []string{"revision/" + strconv.FormatUint(x.Rev, 10)}, nil
	case api.FabricStatus:
		out := []string{}
		for _, d := range x.Devices {
			out = append(out, "device/"+d.Name)
		}
		return out, nil
	case api.FabricDiff:
		out := []string{}
		for _, d := range x.Devices {
			out = append(out, "device/"+d.Device)
		}
		return out, nil
	case render.DeviceFiles:
		return []string{"device/" + x.Device}, nil
	case domain.TopologyView:
		return []string{"topology/" + strconv.FormatUint(x.Revision, 10)}, nil
	case domain.TopologyResult:
		return []string{"topology/" + strconv.FormatUint(x.Revision, 10)}, nil
	case api.ClusterView:
		out := []string{}
		for _, m := range x.Members {
			out = append(out, "member/"+m.ID)
		}
		return out, nil
	}
	return nil, domain.Invalid("output", "-o name: %T has no name to print; use -o json or -o jsonpath=...", v)
}

// named is an output of this package that knows its -o name lines.
type named interface{ names() []string }

// orderedYAML renders v as block-style YAML keeping the field order of its
// JSON encoding (name first, as people write it), where a JSON-to-YAML
// conversion through maps would sort keys alphabetically.
func orderedYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil {
		return nil, fmt.Errorf("re-read as yaml: %w", err)
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return buf.Bytes(), enc.Close()
}

// blockStyle clears the flow style and quoting that JSON input gives nodes;
// the encoder quotes again wherever a plain scalar would change meaning.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
