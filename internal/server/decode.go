package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

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
	return strictDecode(b, v)
}

// strictDecode decodes b into v: unknown fields, wrong types and data
// after the object are errors.
func strictDecode(b []byte, v any) error {
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
// ("role" and "Role" set the same field, and so do "gpus" and "gpuſ" with
// U+017F; "\u0061" is the key "a").
// Malformed JSON is left to the decoder, whose errors say more: the scan
// reads the first value up to its end or to the first byte the decoder
// would refuse, and then says nothing.
//
// It reads the bytes itself rather than through json.Decoder.Token, which
// made an interface value per token, a string per key, a map per object
// and a syntax error per number, about 3 KB a submit (issue 18: the
// leader's allocation rate sets how often its collector marks). It
// allocates nothing unless it refuses, or the body nests deeper than
// len(framesBuf), has more than len(keysBuf) keys in the objects open at
// once or more than smallObject in one object.
func duplicateKeys(b []byte) error {
	i := skipSpace(b, 0)
	if i == len(b) || (b[i] != '{' && b[i] != '[') {
		return nil // a scalar or nothing: no keys to repeat
	}
	var framesBuf [16]jsonFrame
	var keysBuf [64]jsonKey
	// frames holds the open containers, outermost first; keys the keys
	// seen so far in the open objects, each object's after its parent's.
	frames, keys := framesBuf[:0], keysBuf[:0]
	seed := maphash.MakeSeed()
	const (
		atValue = iota // b[i] begins a value
		atNext         // a value inside the innermost container just ended at i
		atKey          // b[i] should begin a key of the innermost object
	)
	state := atValue
	for {
		switch state {
		case atValue:
			c := b[i]
			switch {
			case c == '{' || c == '[':
				if len(frames) >= maxJSONDepth {
					p := keyPath(b, frames)
					return domain.Invalid(p, "JSON nested deeper than %d levels", maxJSONDepth)
				}
				frames = append(frames, jsonFrame{array: c == '[', keys: len(keys)})
				if i = skipSpace(b, i+1); i == len(b) {
					return nil
				}
				switch {
				case c == '[' && b[i] == ']', c == '{' && b[i] == '}':
					i++
					if frames, keys = closeFrame(frames, keys); len(frames) == 0 {
						return nil
					}
					state = atNext
				case c == '[':
					state = atValue
				default:
					state = atKey
				}
				continue
			case c == '"':
				i, _ = scanString(b, i)
			case c == '-' || '0' <= c && c <= '9':
				i = scanNumber(b, i)
			case c == 't':
				i = scanLiteral(b, i, "true")
			case c == 'f':
				i = scanLiteral(b, i, "false")
			case c == 'n':
				i = scanLiteral(b, i, "null")
			default:
				return nil
			}
			if i < 0 {
				return nil
			}
			state = atNext
		case atNext:
			if i = skipSpace(b, i); i == len(b) {
				return nil
			}
			top := &frames[len(frames)-1]
			switch c := b[i]; {
			case c == ',':
				if i = skipSpace(b, i+1); i == len(b) {
					return nil
				}
				if top.array {
					top.n++
					state = atValue
				} else {
					state = atKey
				}
			case top.array && c == ']', !top.array && c == '}':
				i++
				if frames, keys = closeFrame(frames, keys); len(frames) == 0 {
					return nil
				}
			default:
				return nil
			}
		case atKey:
			if b[i] != '"' {
				return nil
			}
			end, plain := scanString(b, i)
			if end < 0 {
				return nil
			}
			k := jsonKey{start: i + 1, end: end - 1, plain: plain}
			k.hash = foldHash(seed, b, k)
			top := &frames[len(frames)-1]
			top.key = k
			own := keys[top.keys:]
			if j := findKey(b, own, top.index, k); j >= 0 {
				return duplicateError(b, frames, own[j], k)
			}
			keys = append(keys, k)
			if n := len(keys) - top.keys; top.index != nil {
				if _, taken := top.index[k.hash]; !taken {
					top.index[k.hash] = n - 1
				}
			} else if n > smallObject {
				// A large object: look keys up by their hash from now on.
				top.index = make(map[uint64]int, 2*n)
				for j := n - 1; j >= 0; j-- { // the first of a colliding hash wins
					top.index[keys[top.keys+j].hash] = j
				}
			}
			if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
				return nil
			}
			if i = skipSpace(b, i+1); i == len(b) {
				return nil
			}
			state = atValue
		}
	}
}

// smallObject is how many keys an object may have before duplicateKeys
// indexes them by hash rather than comparing a new key with each.
const smallObject = 32

// jsonKey is an object's key in the body: the bytes between its quotes.
type jsonKey struct {
	start, end int
	// hash is of its runes folded (foldRune), so keys the same but for
	// case or escapes hash alike.
	hash uint64
	// plain keys are printable ASCII without escapes, compared byte by byte.
	plain bool
}

// jsonFrame is a container open at the scan's position.
type jsonFrame struct {
	array bool
	n     int     // an array's current element
	key   jsonKey // an object's current key
	keys  int     // where an object's keys begin in the key list
	// index maps an object's key hashes to the first key of each (its
	// position in the object), once it has more than smallObject keys.
	index map[uint64]int
}

func closeFrame(frames []jsonFrame, keys []jsonKey) ([]jsonFrame, []jsonKey) {
	f := frames[len(frames)-1]
	if !f.array {
		keys = keys[:f.keys]
	}
	return frames[:len(frames)-1], keys
}

// findKey returns the position in keys of the key the same as k, or -1.
func findKey(b []byte, keys []jsonKey, index map[uint64]int, k jsonKey) int {
	if index != nil {
		j, ok := index[k.hash]
		if !ok {
			return -1
		}
		if sameKey(b, keys[j], k) {
			return j
		}
		// Two different keys of one hash (the seed makes it as rare as
		// chance): compare with every key.
	}
	for j := range keys {
		if sameKey(b, keys[j], k) {
			return j
		}
	}
	return -1
}

// sameKey reports whether two keys name the same field: their runes, as
// encoding/json decodes them, equal but for case (foldRune).
func sameKey(b []byte, x, y jsonKey) bool {
	if x.hash != y.hash {
		return false
	}
	xs, ys := b[x.start:x.end], b[y.start:y.end]
	if x.plain && y.plain {
		if len(xs) != len(ys) {
			return false
		}
		for i := range xs {
			if lowerASCII(xs[i]) != lowerASCII(ys[i]) {
				return false
			}
		}
		return true
	}
	i, j := 0, 0
	for i < len(xs) && j < len(ys) {
		var rx, ry rune
		rx, i = keyRune(xs, i)
		ry, j = keyRune(ys, j)
		if foldRune(rx) != foldRune(ry) {
			return false
		}
	}
	return i == len(xs) && j == len(ys)
}

// foldHash hashes a key's runes folded (foldRune), as UTF-8.
func foldHash(seed maphash.Seed, b []byte, k jsonKey) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	s := b[k.start:k.end]
	if k.plain {
		for _, c := range s {
			h.WriteByte(lowerASCII(c))
		}
		return h.Sum64()
	}
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(s); {
		var r rune
		r, i = keyRune(s, i)
		h.Write(utf8.AppendRune(buf[:0], foldRune(r)))
	}
	return h.Sum64()
}

// foldRune is the one rune of r's case-fold set keys are compared by, as
// encoding/json matches a key to a field (its foldName, bytes.EqualFold):
// "s", "S" and "ſ" (U+017F) name the same field; "i" and "İ" do not.
// An ASCII letter folds to its lower case, as lowerASCII folds plain keys.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(lowerASCII(byte(r)))
	}
	for { // the smallest rune of the set, as encoding/json's foldRune
		f := unicode.SimpleFold(r)
		if f <= r {
			r = f
			break
		}
		r = f
	}
	if r < utf8.RuneSelf {
		return rune(lowerASCII(byte(r)))
	}
	return r
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// keyRune decodes the rune at s[i:] of a key's bytes (scanned: its escapes
// are well formed) as encoding/json's unquote does, and returns the index
// after it: an escape's rune, a valid surrogate pair's one rune, U+FFFD
// for a lone surrogate and for each byte of invalid UTF-8.
func keyRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c >= utf8.RuneSelf {
		r, size := utf8.DecodeRune(s[i:])
		return r, i + size
	}
	if c != '\\' {
		return rune(c), i + 1
	}
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(s[i+2 : i+6])
		i += 6
		if utf16.IsSurrogate(r) {
			if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if pair := utf16.DecodeRune(r, hex4(s[i+2:i+6])); pair != unicode.ReplacementChar {
					return pair, i + 6
				}
			}
			return unicode.ReplacementChar, i
		}
		return r, i
	}
	return rune(s[i+1]), i + 2 // \" \\ \/
}

// hex4 is the value of 4 hexadecimal digits (scanned as such).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// keyString is a key as encoding/json decodes it.
func keyString(b []byte, k jsonKey) string {
	var s string
	_ = json.Unmarshal(b[k.start-1:k.end+1], &s) // scanned: it decodes
	return s
}

// keyPath names the position of the innermost open container's current
// key or element, as a field path: spec.gpus, models[1].model.
func keyPath(b []byte, frames []jsonFrame) string {
	var p strings.Builder
	for _, f := range frames {
		if f.array {
			p.WriteByte('[')
			p.WriteString(strconv.Itoa(f.n))
			p.WriteByte(']')
			continue
		}
		if p.Len() > 0 {
			p.WriteByte('.')
		}
		p.WriteString(keyString(b, f.key))
	}
	return p.String()
}

func duplicateError(b []byte, frames []jsonFrame, first, dup jsonKey) error {
	p := keyPath(b, frames)
	key, was := keyString(b, dup), keyString(b, first)
	if was == key {
		return domain.Invalid(p, "duplicate key %q at %s: each key may appear once in an object", key, p)
	}
	return domain.Invalid(p, "duplicate key %q at %s: %q is the same field (keys match fields regardless of case)", key, p, was)
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string at b[i] (a quote) and
// whether it is plain (printable ASCII without escapes), or -1 where
// encoding/json refuses it.
func scanString(b []byte, i int) (int, bool) {
	plain := true
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, plain
		case c < 0x20:
			return -1, false
		case c >= utf8.RuneSelf:
			plain = false
		case c == '\\':
			plain = false
			if i++; i == len(b) {
				return -1, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1, false
					}
				}
				i += 4
			default:
				return -1, false
			}
		}
	}
	return -1, false
}

// scanNumber returns the index after the number at b[i], or -1 where
// encoding/json refuses it.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i == len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i++; i == len(b) || !isDigit(b[i]) {
			return -1
		}
		i = skipDigits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return -1
		}
		i = skipDigits(b, i)
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// scanLiteral returns the index after lit at b[i], or -1.
func scanLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
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
