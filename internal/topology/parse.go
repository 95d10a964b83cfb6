package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// The apiVersion and kind a topology file may declare. Both may be omitted;
// Normalize fills them so the fingerprint does not depend on the choice.
const (
	APIVersion = "jobfabric/v1"
	Kind       = "Topology"
)

// Parse decodes a topology file, YAML or JSON. Every unknown field and every
// value of the wrong type is reported (up to a cap) in one
// invalid_argument *domain.Error whose Field is the JSON path of the first
// problem, e.g. "sites[0].fabrics[0].servers[2].gpus". Parse checks shape
// only; call Normalize and Validate for the rules.
func Parse(data []byte) (*domain.Topology, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, domain.Invalid("", "the topology document is empty")
	}
	if err := singleDocument(data); err != nil {
		return nil, err
	}
	// Strict: a key given twice is almost always a copy-paste mistake, and
	// silently keeping one of the two would apply something nobody reviewed.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// yaml.v2 lists several errors on indented lines; keep one line.
		msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")), " ")
		return nil, domain.Invalid("", "malformed topology document: %s", msg)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // keep integers exact so range errors name the real value
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, domain.Invalid("", "malformed topology document: %v", err)
	}
	if generic == nil {
		return nil, domain.Invalid("", "the topology document is empty")
	}
	// Walking the generic value against the Go type finds every unknown key
	// and wrong type with its full path; encoding/json stops at the first and
	// its messages lose list indexes.
	var ps problems
	w := shapeWalker{ps: &ps, fields: map[reflect.Type]map[string]reflect.StructField{}}
	w.walk(generic, reflect.TypeFor[domain.Topology](), "")
	if derr := ps.err("topology document"); derr != nil {
		return nil, derr
	}
	var t domain.Topology
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		// The walker should have caught this; keep a safety net anyway.
		return nil, jsonDecodeError(err)
	}
	if t.APIVersion != "" && t.APIVersion != APIVersion {
		return nil, domain.Invalid("apiVersion", "apiVersion %q is not supported; use %q", t.APIVersion, APIVersion)
	}
	if t.Kind != "" && t.Kind != Kind {
		return nil, domain.Invalid("kind", "kind %q is not a topology; use %q", t.Kind, Kind)
	}
	return &t, nil
}

// singleDocument rejects multi-document YAML: the converter reads only the
// first document, and silently dropping the rest of a file is worse than
// refusing it.
func singleDocument(data []byte) error {
	docs, content := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimRight(line, " \t\r")
		if l == "---" || strings.HasPrefix(l, "--- ") {
			if content {
				docs++
			}
			content = strings.TrimSpace(strings.TrimPrefix(l, "---")) != ""
			continue
		}
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "..." {
			content = true
		}
	}
	if content {
		docs++
	}
	if docs > 1 {
		return domain.Invalid("", "the file holds %d YAML documents; a topology file holds exactly one", docs)
	}
	return nil
}

func jsonDecodeError(err error) *domain.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return domain.Invalid(te.Field, "%s must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return domain.Invalid("", "malformed topology document: %v", err)
}

// shapeWalker compares a decoded JSON value with the Go type it must fill.
type shapeWalker struct {
	ps     *problems
	fields map[reflect.Type]map[string]reflect.StructField
}

func (w *shapeWalker) walk(v any, t reflect.Type, path string) {
	if v == nil {
		return // null leaves the zero value, as encoding/json does
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(v, t.Elem(), path)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			w.wrongType(path, "an object", v)
			return
		}
		fields := w.structFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic problem order
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				w.unknown(path, k, fields)
				continue
			}
			w.walk(m[k], f.Type, joinPath(path, k))
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			w.wrongType(path, "a list", v)
			return
		}
		for i, e := range a {
			w.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			hint := ""
			if _, isBool := v.(bool); isBool {
				hint = " (in YAML, yes/no/on/off/true/false are booleans: quote the value)"
			} else if _, isNum := v.(json.Number); isNum {
				hint = " (quote the value so YAML keeps it as text)"
			}
			w.ps.add(path, "", "type", "%s must be a string, not %s%s", pathName(path), describe(v), hint)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			w.wrongType(path, "true or false", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			w.wrongType(path, "an integer", v)
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			w.badInteger(path, n, err, fmt.Sprintf("between %d and %d", int64(-1)<<(t.Bits()-1), int64(uint64(1)<<(t.Bits()-1)-1)))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			w.wrongType(path, "an integer", v)
			return
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			if _, ierr := strconv.ParseInt(n.String(), 10, 64); ierr == nil {
				err = strconv.ErrRange // a negative whole number: out of range, not malformed
			}
			w.badInteger(path, n, err, fmt.Sprintf("between 0 and %d", uint64(1)<<t.Bits()-1))
		}
	default:
		// Topology only holds the kinds above; a new kind in domain must be
		// taught here rather than accepted unchecked.
		w.ps.add(path, "", "type", "%s has a Go type (%s) the topology parser does not check", pathName(path), t)
	}
}

func (w *shapeWalker) badInteger(path string, n json.Number, err error, bounds string) {
	if errors.Is(err, strconv.ErrRange) {
		w.ps.add(path, "", "type", "%s is %s; it must be %s", pathName(path), n, bounds)
		return
	}
	w.ps.add(path, "", "type", "%s must be a whole number, not %s", pathName(path), n)
}

func (w *shapeWalker) wrongType(path, want string, v any) {
	w.ps.add(path, "", "type", "%s must be %s, not %s", pathName(path), want, describe(v))
}

func (w *shapeWalker) unknown(path, key string, fields map[string]reflect.StructField) {
	where := "at the top level"
	if path != "" {
		where = "in " + path
	}
	msg := fmt.Sprintf("unknown field %q %s", key, where)
	if s := suggest(key, fields); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	w.ps.add(keyPath(path, key), "", "unknown-field", "%s", msg)
}

// plainKey is a key a dotted path can carry as is.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// keyPath is joinPath for a key as written in the document: one that is
// empty or holds dots, brackets or spaces is quoted (servers[0][""]), so
// the path still names it.
func keyPath(path, key string) string {
	if plainKey.MatchString(key) {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// structFields maps JSON names to fields, as encoding/json would (exported
// fields, tag name or field name), but matched exactly: "Name" for "name" is
// reported instead of being accepted case-insensitively.
func (w *shapeWalker) structFields(t reflect.Type) map[string]reflect.StructField {
	if m, ok := w.fields[t]; ok {
		return m
	}
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	w.fields[t] = m
	return m
}

// suggest returns the known field closest to key: a case-insensitive match,
// else the nearest within two edits. Ties go to the alphabetically first so
// messages are stable.
func suggest(key string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathName(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}
