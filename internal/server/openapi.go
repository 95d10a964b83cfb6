package server

import (
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// OpenAPI builds the OpenAPI 3 document from the route table, so the served
// document always describes the operations the server really has. The
// committed copy (api/openapi.json) is checked against it by a test.
func (s *Server) OpenAPI() map[string]any { return buildOpenAPI(s.routes) }

func (s *Server) openapi(r *http.Request, _ *principal) (any, error) { return s.OpenAPI(), nil }

// Routes returns the API's routes as "METHOD path" strings, for tests.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, r := range s.routes {
		out[i] = r.method + " " + r.path
	}
	return out
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

func buildOpenAPI(routes []route) map[string]any {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]any{}
	for _, rt := range routes {
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt),
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.doc, "schema": map[string]any{"type": q.typ}})
		}
		if rt.dedup {
			params = append(params, map[string]any{"name": idempotencyHeader, "in": "header", "description": "client-chosen key (at most 128 characters): a retry with the same key returns the first attempt's result", "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.body != nil {
			content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.body))}}
			if rt.yaml {
				content["application/yaml"] = map[string]any{"schema": g.schema(reflect.TypeOf(rt.body))}
			}
			op["requestBody"] = map[string]any{"required": true, "content": content}
		}
		status := rt.status
		if status == 0 {
			status = http.StatusOK
		}
		errResp := map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
		content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp))}}
		if rt.sse != nil {
			// OpenAPI 3.0 cannot type an event stream: say in words what
			// each event's data is, and reference its schema.
			name := reflect.TypeOf(rt.resp).Name()
			content = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{
				"type":        "string",
				"description": "Server-Sent Events; the data of each event is one JSON " + name + " (#/components/schemas/" + name + ")",
			}}}
		}
		op["responses"] = map[string]any{
			strconv.Itoa(status): map[string]any{"description": http.StatusText(status), "content": content},
			"default":            errResp,
		}
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
	g.schema(reflect.TypeOf(errorDoc{}))
	g.defs["Error"] = g.defs["errorDoc"]
	delete(g.defs, "errorDoc")
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "jobfabric API",
			"version":     "v1",
			"description": "Control plane for shared GPU clusters. Errors are {code, message, field?, details?} with stable codes.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

// errorDoc mirrors domain.Error for the document (named Error there).
type errorDoc struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Details []struct {
		Field   string `json:"field,omitempty"`
		Object  string `json:"object,omitempty"`
		Rule    string `json:"rule,omitempty"`
		Message string `json:"message"`
	} `json:"details,omitempty"`
}

func operationID(rt route) string {
	p := strings.NewReplacer("/v1/", "", "/", "_", "{", "", "}", "", ".", "_").Replace(rt.path)
	return strings.ToLower(rt.method) + "_" + p
}

// schemaGen turns Go types into JSON schemas, named structs into components.
type schemaGen struct{ defs map[string]any }

var timeType = reflect.TypeOf(time.Time{})

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if name == "" {
			return g.structSchema(t)
		}
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = map[string]any{} // placeholder breaks recursion
			g.defs[name] = g.structSchema(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = g.schema(f.Type)
			if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, name)
			}
		}
	}
	walk(t)
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
