package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Request body limits: an API object is small; a topology of a large cluster
// is not.
const (
	maxBody         = 1 << 20
	maxTopologyBody = 64 << 20
)

// readBody reads at most limit bytes and names the limit when it is exceeded.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "reading request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, domain.Errorf(domain.CodePayloadTooLarge, "request body exceeds the limit of %d bytes", limit)
	}
	return b, nil
}

// decodeJSON decodes one JSON object strictly: unknown fields, wrong types,
// trailing data and oversize bodies are invalid_argument errors naming the field.
func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r, maxBody)
	if err != nil {
		return err
	}
	return strictUnmarshal(b, v)
}

func strictUnmarshal(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return domain.Errorf(domain.CodeInvalidArgument, "request body is empty; a JSON object is required")
	}
	if err := duplicateKeys(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return domain.Errorf(domain.CodeInvalidArgument, "request body has data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return domain.Invalid(te.Field, "field %s: %s is not a valid %s", te.Field, te.Value, te.Type)
	case errors.As(err, &se):
		return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON: unexpected end of input")
	}
	// encoding/json has no typed error for unknown fields; its message is
	// `json: unknown field "x"`.
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return domain.Invalid(f, "unknown field %q", f)
	}
	return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON: %v", err)
}

// maxJSONDepth bounds nesting in duplicateKeys (encoding/json refuses
// deeper documents too).
const maxJSONDepth = 10000

// duplicateKeys refuses a JSON document that gives a key twice in one
// object, naming its path: encoding/json keeps the last silently, so a body
// reviewed (or filtered by a proxy) as one thing would apply as another.
// Keys are compared as encoding/json matches them to fields, ignoring case
// ("role" and "Role" set the same field). Malformed JSON is left to the
// decoder, whose errors say more.
func duplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var de *domain.Error
	if err := walkKeys(dec, "", 0); errors.As(err, &de) {
		return de
	}
	return nil
}

func walkKeys(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxJSONDepth {
		return domain.Invalid(path, "JSON nested deeper than %d levels", maxJSONDepth)
	}
	switch d {
	case '{':
		seen := map[string]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			p := key
			if path != "" {
				p = path + "." + key
			}
			if first, dup := seen[strings.ToLower(key)]; dup {
				if first == key {
					return domain.Invalid(p, "duplicate key %q at %s: each key may appear once in an object", key, p)
				}
				return domain.Invalid(p, "duplicate key %q at %s: %q is the same field (keys match fields regardless of case)", key, p, first)
			}
			seen[strings.ToLower(key)] = key
			if err := walkKeys(dec, p, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// checkBodyHeaders refuses a body the operation cannot read: a
// Content-Type other than JSON (or YAML where yaml is set) and any
// Content-Encoding but identity, with 415 naming what is accepted. A body
// without Content-Type is read as JSON (curl and scripts often send none).
func checkBodyHeaders(r *http.Request, yaml bool) error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
		return &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Encoding",
			Message: fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed", ce)}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	accepted := "application/json"
	if yaml {
		accepted += ", application/yaml"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Type",
			Message: fmt.Sprintf("Content-Type %q is malformed (%v); this operation takes %s", ct, err, accepted)}
	}
	ok := mt == "application/json" || (yaml && (mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml"))
	if !ok {
		return &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Type",
			Message: fmt.Sprintf("Content-Type %q is not accepted; this operation takes %s", mt, accepted)}
	}
	if cs, given := params["charset"]; given && !strings.EqualFold(cs, "utf-8") {
		return &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Type",
			Message: fmt.Sprintf("charset %q is not accepted; bodies are UTF-8", cs)}
	}
	return nil
}

// queryInt parses an optional integer query parameter.
func queryInt(r *http.Request, name string, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, domain.Invalid(name, "query parameter %s=%q is not an integer", name, s)
	}
	if err := domain.ValidateRange(name, v, lo, hi); err != nil {
		return 0, err
	}
	return v, nil
}
