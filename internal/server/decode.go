package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
