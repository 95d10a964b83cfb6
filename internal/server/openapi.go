package server

import (
	"encoding"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/httpcode"
)

// OpenAPI builds the OpenAPI 3 document from the route table, so the served
// document always describes the operations the server really has. The
// committed copy (api/openapi.json) is checked against it by a test.
// Descriptions and enums come from the Go sources' comments and constants,
// extracted into openapi_docs_gen.go (see TestOpenAPISources).
func (s *Server) OpenAPI() map[string]any { return buildOpenAPI(s.routes).doc }

func (s *Server) openapi(r *http.Request, _ *principal) (any, error) { return s.OpenAPI(), nil }

// Routes returns the API's routes as "METHOD path" strings, for tests.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, r := range s.routes {
		out[i] = r.method + " " + r.path
	}
	return out
}

// OpenAPITypes lists the Go types the document describes, as
// "module-relative/package.Type", so the generator of openapi_docs_gen.go
// extracts the comments and constants of exactly these.
func (s *Server) OpenAPITypes() []string {
	g := buildOpenAPI(s.routes).gen
	var out []string
	for t := range g.seen {
		out = append(out, typeKey(t))
	}
	for t := range g.strs {
		out = append(out, typeKey(t))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out
}

// pathParam matches a path parameter of net/http's patterns ({id},
// {externalId}, {path...}).
var pathParam = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}`)

// altResponse is a second success answer of an operation whose handler
// answers another type on request (withStatus): the route table has one
// response type per route.
type altResponse struct {
	status int
	resp   any
	doc    string
}

var altResponses = map[string]altResponse{
	"POST /v1/jobs": {http.StatusOK, api.DryRun{}, "with dryRun=true: where the job would land now, or why it would wait; nothing is submitted"},
}

// pathDocs describe the path parameters by name.
var pathDocs = map[string]string{
	"id":         "the object's id (a job's number, a token's id, a member's node id)",
	"tenant":     "tenant name",
	"workspace":  "workspace name within the tenant",
	"name":       "server (node) name as in the topology",
	"externalId": "a workload runtime's id of the job, such as slurm:4242",
	"pool":       "server pool name, such as slurm:CLUSTER:PARTITION",
}

// apiTags are the resources operations are grouped by, in document order.
var apiTags = []struct{ name, doc string }{
	{"system", "Health, this document and the calling token"},
	{"cluster", "Control-plane members (Raft voters)"},
	{"topology", "The declared sites, fabrics, switches, servers and cables"},
	{"tenants", "Organisations sharing the cluster, with their isolation and network model"},
	{"workspaces", "Quota holders inside a tenant"},
	{"tokens", "Bearer tokens and their roles"},
	{"jobs", "Job submission, state, lifecycle reports and watches"},
	{"bindings", "What a host applies for a placed job"},
	{"events", "The audit trail"},
	{"usage", "GPU-hours per tenant, workspace, job and token, guaranteed and borrowed"},
	{"nodes", "Servers' scheduling condition (cordon, drain, unhealthy)"},
	{"pools", "Server pools: where a workload runtime can run a job (a Slurm partition)"},
	{"hosts", "Node agents: facts, heartbeats, GPU baselines and the host policy"},
	{"fabric", "Fabric revisions, rendered configurations, deploys and verification"},
	{"telemetry", "Fabric, NIC and GPU counters scraped from exporters or pushed"},
}

// tagOf groups an operation by its resource, from its path.
func tagOf(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/v1/"), "/")
	last := segs[len(segs)-1]
	switch {
	case slices.Contains(segs, "workspaces"):
		return "workspaces"
	case last == "binding":
		return "bindings"
	case segs[0] == "nodes" && len(segs) > 2:
		return "hosts" // an agent's facts, heartbeat, record and job reports
	case segs[0] == "external-jobs" || segs[0] == "queue":
		return "jobs"
	case segs[0] == "health" || segs[0] == "openapi.json" || segs[0] == "whoami":
		return "system"
	}
	return segs[0]
}

// errorsOf says which error statuses an operation can answer.
func errorsOf(rt route) []int {
	var out []int
	hasInput := rt.body != nil || rt.rawBody != nil || len(rt.query) > 0 || pathParam.MatchString(rt.path)
	if hasInput {
		out = append(out, http.StatusBadRequest)
	}
	if rt.access != public {
		out = append(out, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound)
	}
	if rt.method != http.MethodGet {
		out = append(out, http.StatusConflict)
	}
	if rt.body != nil || rt.rawBody != nil {
		out = append(out, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	if rt.access != public {
		// Admission: a source over its failed authentications.
		out = append(out, http.StatusTooManyRequests)
	}
	if !rt.local {
		out = append(out, http.StatusServiceUnavailable)
	}
	return out
}

type builtDoc struct {
	doc map[string]any
	gen *schemaGen
}

func buildOpenAPI(routes []route) builtDoc {
	g := newSchemaGen()
	// Pass 1 collects every named type, so colliding names are qualified
	// whatever the order types are met in.
	for _, rt := range routes {
		g.collect(reflect.TypeOf(rt.resp), false)
		if rt.body != nil {
			g.collect(reflect.TypeOf(rt.body), true)
		}
		if alt, ok := altResponses[rt.method+" "+rt.path]; ok {
			g.collect(reflect.TypeOf(alt.resp), false)
		}
	}
	g.collect(reflect.TypeOf(domain.Error{}), false)
	g.assignNames()

	paths := map[string]any{}
	for _, rt := range routes {
		op := map[string]any{
			"summary":     summaryOf(rt.summary),
			"operationId": operationID(rt),
			"tags":        []any{tagOf(rt.path)},
		}
		if s := summaryOf(rt.summary); s != rt.summary {
			op["description"] = rt.summary
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			p := map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
			if d := pathDocs[m[1]]; d != "" {
				p["description"] = d
			}
			params = append(params, p)
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.doc, "schema": map[string]any{"type": q.typ}})
		}
		if rt.dedup {
			params = append(params, map[string]any{"name": idempotencyHeader, "in": "header", "description": "client-chosen key (at most 128 characters), the caller's own: a retry with the same key returns the first attempt's job while the key is among the last 100,000 keys submitted to the cluster and the job is still in the state; a key whose job retention removed makes a new job, and names it from then on (docs/operations.md, Retention, \"Idempotency keys\")", "schema": map[string]any{"type": "string", "maxLength": 128}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.body != nil {
			content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.body), true)}}
			if rt.yaml {
				content["application/yaml"] = map[string]any{"schema": g.schema(reflect.TypeOf(rt.body), true)}
			}
			op["requestBody"] = map[string]any{"required": true, "content": content}
		}
		if rt.rawBody != nil {
			content := map[string]any{}
			for _, mt := range rt.rawBody {
				content[mt] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
			}
			op["requestBody"] = map[string]any{"required": true, "content": content}
		}
		status := rt.status
		if status == 0 {
			status = http.StatusOK
		}
		content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp), false)}}
		if rt.sse != nil {
			// OpenAPI 3.0 cannot type an event stream: say in words what
			// each event's data is, and reference its schema.
			et := reflect.TypeOf(rt.resp)
			for et.Kind() == reflect.Slice || et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			g.schema(et, false)
			name := g.names[et]
			content = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{
				"type":        "string",
				"description": "Server-Sent Events; the data of each event is one JSON " + name + " (#/components/schemas/" + name + ")",
			}}}
		}
		responses := map[string]any{
			strconv.Itoa(status): map[string]any{"description": http.StatusText(status), "content": content},
			"default":            map[string]any{"$ref": "#/components/responses/Internal"},
		}
		if alt, ok := altResponses[rt.method+" "+rt.path]; ok {
			responses[strconv.Itoa(alt.status)] = map[string]any{"description": alt.doc,
				"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(alt.resp), false)}}}
		}
		for _, st := range errorsOf(rt) {
			for _, e := range httpcode.Answers() {
				if e.Status == st {
					responses[strconv.Itoa(st)] = map[string]any{"$ref": "#/components/responses/" + e.Name}
				}
			}
		}
		op["responses"] = responses
		if rt.access != public {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		}
		item, _ := paths[rt.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = op
	}

	errRef := g.schema(reflect.TypeOf(domain.Error{}), false)
	responses := map[string]any{
		"Internal": map[string]any{"description": "internal: an unexpected failure", "content": map[string]any{"application/json": map[string]any{"schema": errRef}}},
	}
	// The documented error answers (docs/operations.md).
	for _, e := range httpcode.Answers() {
		var codes []string
		for _, c := range e.Codes {
			codes = append(codes, string(c))
		}
		// The answer is an Error whose code is one of this status's.
		schema := map[string]any{"allOf": []any{errRef, map[string]any{
			"type":       "object",
			"properties": map[string]any{"code": map[string]any{"type": "string", "enum": toAny(codes)}},
		}}}
		responses[e.Name] = map[string]any{
			"description": strings.Join(codes, ", ") + " (see the Error schema; docs/operations.md)",
			"content":     map[string]any{"application/json": map[string]any{"schema": schema}},
		}
	}
	var tags []any
	for _, t := range apiTags {
		tags = append(tags, map[string]any{"name": t.name, "description": t.doc})
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "jobfabric API",
			"version":     "v1",
			"description": "Control plane for shared GPU clusters. Errors are {code, message, field?, details?} with stable codes.",
		},
		"tags":  tags,
		"paths": paths,
		"components": map[string]any{
			"schemas":   g.defs,
			"responses": responses,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "jf_ID_SECRET",
				"description": "a token's secret, shown once when the token is created (the server's first admin token is in its data dir, admin.token)"}},
		},
	}
	return builtDoc{doc: doc, gen: g}
}

// summaryOf is the first clause of a route's summary (up to ";", ": " or
// ". "), the title tools show; the whole text becomes the description.
func summaryOf(s string) string {
	for _, sep := range []string{"; ", ": ", ". "} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return s
}

func operationID(rt route) string {
	p := strings.NewReplacer("/v1/", "", "/", "_", "{", "", "}", "", ".", "_", "-", "_").Replace(rt.path)
	return strings.ToLower(rt.method) + "_" + p
}

// modulePath prefixes the import paths of this module's packages; schema
// keys drop it ("internal/domain.Job").
const modulePath = "github.com/jobfabric/jobfabric/"

func typeKey(t reflect.Type) string {
	return strings.TrimPrefix(t.PkgPath(), modulePath) + "." + t.Name()
}

// schemaGen turns Go types into JSON schemas, named structs and enum
// types into components.
//
// A struct has two schemas: as the server answers it (required: what
// encoding/json always writes; nullable: a nil slice, map or pointer it
// writes as null) and as a request body (required: what the server refuses
// to go without, tagged `openapi:"required"`, for the decoder itself
// requires nothing; no unknown fields, which the decoder refuses). The
// request form of a type used both ways is named with an Input suffix.
type schemaGen struct {
	seen   map[reflect.Type]bool // named structs and enum types met
	input  map[reflect.Type]bool // structs met inside a request body
	answer map[reflect.Type]bool // structs met inside an answer
	strs   map[reflect.Type]bool // named string types met (enum candidates)
	names  map[reflect.Type]string
	defs   map[string]any
	owner  map[string]reflect.Type // the type of each component
}

func newSchemaGen() *schemaGen {
	return &schemaGen{seen: map[reflect.Type]bool{}, input: map[reflect.Type]bool{}, answer: map[reflect.Type]bool{}, strs: map[reflect.Type]bool{}, names: map[reflect.Type]string{}, defs: map[string]any{}, owner: map[string]reflect.Type{}}
}

var (
	timeType          = reflect.TypeOf(time.Time{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

// isText reports whether encoding/json writes t as a string through
// MarshalText.
func isText(t reflect.Type) bool {
	if t == timeType || t.Kind() == reflect.String || t.Kind() == reflect.Pointer {
		return false
	}
	return (t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType))
}

func (g *schemaGen) collect(t reflect.Type, input bool) {
	switch {
	case t == timeType || isText(t):
		return
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map:
		g.collect(t.Elem(), input)
	case t.Kind() == reflect.String && t.Name() != "" && strings.HasPrefix(t.PkgPath(), modulePath):
		g.strs[t] = true
		if len(typeEnums[typeKey(t)]) > 0 {
			g.seen[t] = true
		}
	case t.Kind() == reflect.Struct:
		if t.Name() != "" {
			set := g.answer
			if input {
				set = g.input
			}
			if set[t] {
				return
			}
			set[t] = true
			g.seen[t] = true
		}
		for _, f := range fields(t) {
			g.collect(f.typ, input)
		}
	}
}

// assignNames names each type by its Go name, qualified by its package
// where two packages use the same name (BindingNIC, DomainNIC).
func (g *schemaGen) assignNames() {
	count := map[string]int{}
	for t := range g.seen {
		count[t.Name()]++
	}
	for t := range g.seen {
		name := t.Name()
		if count[name] > 1 {
			pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
			name = strings.ToUpper(pkg[:1]) + pkg[1:] + name
		}
		g.names[t] = name
	}
}

type field struct {
	name     string
	typ      reflect.Type
	owner    reflect.Type // the struct declaring it (for its doc)
	goName   string
	omit     bool // encoding/json may leave it out
	required bool // the server refuses a request without it
}

// fields lists the JSON fields of a struct as encoding/json sees them,
// embedded structs flattened.
func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
				continue
			}
			if !f.IsExported() {
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		optList := strings.Split(opts, ",")
		omit := slices.Contains(optList, "omitzero") ||
			(slices.Contains(optList, "omitempty") && ft.Kind() != reflect.Struct) // omitempty never omits a struct
		out = append(out, field{name: name, typ: ft, owner: t, goName: f.Name, omit: omit,
			required: slices.Contains(strings.Split(f.Tag.Get("openapi"), ","), "required")})
	}
	return out
}

func (g *schemaGen) schema(t reflect.Type, input bool) map[string]any {
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	if isText(t) {
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem(), input)
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.String:
		if t.Name() != "" && len(typeEnums[typeKey(t)]) > 0 {
			name := g.names[t]
			if _, ok := g.defs[name]; !ok {
				g.claim(name, t)
				s := map[string]any{"type": "string", "enum": toAny(typeEnums[typeKey(t)])}
				if d := docs[typeKey(t)]; d != "" {
					s["description"] = d
				}
				g.defs[name] = s
			}
			return map[string]any{"$ref": "#/components/schemas/" + name}
		}
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.elem(t.Elem(), input)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.elem(t.Elem(), input)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return g.structSchema(t, input)
		}
		name := g.names[t]
		if name == "" {
			panic(fmt.Sprintf("openapi: type %s was not collected", typeKey(t)))
		}
		if input && g.answer[t] {
			// Used both ways: the request form (other required fields,
			// no unknown fields, no nulls) gets a name of its own.
			name += "Input"
		}
		if _, ok := g.defs[name]; !ok {
			g.claim(name, t)
			g.defs[name] = map[string]any{} // placeholder breaks recursion
			s := g.structSchema(t, input)
			if d := docs[typeKey(t)]; d != "" {
				s["description"] = d
			}
			g.defs[name] = s
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// claim records that name is t's schema: two types under one name would
// describe one of them wrongly.
func (g *schemaGen) claim(name string, t reflect.Type) {
	if o, ok := g.owner[name]; ok && o != t {
		panic(fmt.Sprintf("openapi: %s and %s are both named %s", typeKey(o), typeKey(t), name))
	}
	g.owner[name] = t
}

// elem is the schema of a slice's or map's elements: nil ones are written
// as null.
func (g *schemaGen) elem(t reflect.Type, input bool) map[string]any {
	s := g.schema(t, input)
	if !input && nilable(t) {
		s = nullable(s)
	}
	return s
}

func nilable(t reflect.Type) bool {
	k := t.Kind()
	return (k == reflect.Pointer || k == reflect.Slice || k == reflect.Map || k == reflect.Interface) && !isText(t)
}

// nullable allows null besides s (a $ref cannot have siblings in 3.0).
func nullable(s map[string]any) map[string]any {
	if _, ref := s["$ref"]; ref {
		s = map[string]any{"allOf": []any{s}}
	}
	s["nullable"] = true
	return s
}

func (g *schemaGen) structSchema(t reflect.Type, input bool) map[string]any {
	props := map[string]any{}
	var required []any
	for _, f := range fields(t) {
		s := g.schema(f.typ, input)
		if vals := fieldEnums[typeKey(f.owner)+"."+f.goName]; len(vals) > 0 {
			if s["type"] == "array" {
				s["items"] = map[string]any{"type": "string", "enum": toAny(vals)}
			} else {
				s["enum"] = toAny(vals)
			}
		}
		if !input && !f.omit && nilable(f.typ) {
			s = nullable(s)
		}
		desc := docs[typeKey(f.owner)+"."+f.goName]
		if _, ref := s["$ref"]; ref && desc != "" {
			s = map[string]any{"allOf": []any{s}}
		}
		if desc != "" {
			s["description"] = desc
		}
		props[f.name] = s
		if (input && f.required) || (!input && !f.omit) {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if input {
		// The decoder refuses unknown fields.
		s["additionalProperties"] = false
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func toAny(vs []string) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
