package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// oldDuplicateKeys is duplicateKeys as it was before the byte scanner
// (through json.Decoder.Token), keys compared by strings.ToLower.
func oldDuplicateKeys(b []byte) error { return oldWalk(b, false) }

// refDuplicateKeys is the old walk with keys compared by strings.EqualFold,
// as encoding/json matches a key to a field: the oracle the scanner must
// agree with.
func refDuplicateKeys(b []byte) error { return oldWalk(b, true) }

func oldWalk(b []byte, equalFold bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var de *domain.Error
	if err := oldWalkKeys(dec, "", 0, equalFold); errors.As(err, &de) {
		return de
	}
	return nil
}

func oldWalkKeys(dec *json.Decoder, path string, depth int, equalFold bool) error {
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
		var order []string // the keys so far, with equalFold
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
			first, dup := seen[strings.ToLower(key)]
			if equalFold {
				first, dup = "", false
				for _, k := range order {
					if strings.EqualFold(k, key) {
						first, dup = k, true
						break
					}
				}
				order = append(order, key)
			}
			if dup {
				if first == key {
					return domain.Invalid(p, "duplicate key %q at %s: each key may appear once in an object", key, p)
				}
				return domain.Invalid(p, "duplicate key %q at %s: %q is the same field (keys match fields regardless of case)", key, p, first)
			}
			seen[strings.ToLower(key)] = key
			if err := oldWalkKeys(dec, p, depth+1, equalFold); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := oldWalkKeys(dec, fmt.Sprintf("%s[%d]", path, i), depth+1, equalFold); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// agree reports how the scanner and the oracle differ on b ("" if not).
func agree(b []byte) string {
	want, got := refDuplicateKeys(b), duplicateKeys(b)
	if (want == nil) != (got == nil) {
		return fmt.Sprintf("duplicateKeys = %v, the old walk %v", got, want)
	}
	if want == nil {
		return ""
	}
	var w, g *domain.Error
	if !errors.As(got, &g) {
		return fmt.Sprintf("duplicateKeys = %T %v, not a *domain.Error", got, got)
	}
	errors.As(want, &w)
	if g.Code != w.Code || g.Field != w.Field || g.Message != w.Message || len(g.Details)+len(w.Details) != 0 {
		return fmt.Sprintf("duplicateKeys = %s %q %q, the old walk %s %q %q", g.Code, g.Field, g.Message, w.Code, w.Field, w.Message)
	}
	return ""
}

// submitBody is a realistic `job submit` body: most of a JobSpec's fields.
func submitBody(tb testing.TB) []byte {
	tb.Helper()
	b, err := json.Marshal(domain.JobSpec{
		Name: "llama-70b-finetune", Tenant: "acme", Workspace: "research",
		GPUs: 64, GPUsPerNode: 8, GPUModels: []string{"H100-80GB", "A100-80GB"},
		Priority: 100, Preemptible: true, TimeLimitSeconds: 86400, MinRuntimeSeconds: 600,
		ExpectedDurationSeconds: 36000, Topology: &domain.TopologyRequirement{Level: "TopologyStripe", Required: true},
		MinDriver: "535.104", ExternalID: "slurm:4242", CPUMilli: 64000, MemoryMiB: 512000,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// manyKeys is an object of n keys k0..k(n-1) and then extra.
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(extra)
	b.WriteString("}")
	return b.String()
}

// TestDuplicateKeys: each rule of the duplicate-key check, with the exact
// error (nil: the body is the decoder's to judge).
func TestDuplicateKeys(t *testing.T) {
	deepArray := strings.Repeat("[0]", maxJSONDepth)
	deepObject := strings.TrimSuffix(strings.Repeat("a.", maxJSONDepth), ".")
	for name, tc := range map[string]struct {
		body, field, msg string
	}{
		"no duplicate":         {`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, "", ""},
		"a submit":             {string(submitBody(t)), "", ""},
		"top level":            {`{"gpus":1,"gpus":8}`, "gpus", `duplicate key "gpus" at gpus: each key may appear once in an object`},
		"differs in case":      {`{"role":"member","Role":"admin"}`, "Role", `duplicate key "Role" at Role: "role" is the same field (keys match fields regardless of case)`},
		"nested":               {`{"spec":{"gpus":1,"gpus":2}}`, "spec.gpus", `duplicate key "gpus" at spec.gpus: each key may appear once in an object`},
		"in a list":            {`{"a":[0,1,{"b":1,"b":2}]}`, "a[2].b", `duplicate key "b" at a[2].b: each key may appear once in an object`},
		"top-level list":       {`[{},{"x":1,"X":2}]`, "[1].X", `duplicate key "X" at [1].X: "x" is the same field (keys match fields regardless of case)`},
		"list in a list":       {`[[1],[2,{"x":1,"x":1}]]`, "[1][1].x", `duplicate key "x" at [1][1].x: each key may appear once in an object`},
		"empty key":            {`{"":1,"":2}`, "", `duplicate key "" at : each key may appear once in an object`},
		"under an empty key":   {`{"":{"a":1,"a":2}}`, "a", `duplicate key "a" at a: each key may appear once in an object`},
		"same key, siblings":   {`{"a":{"x":1},"b":{"x":1}}`, "", ""},
		"escaped key":          {`{"a":1,"\u0061":2}`, "a", `duplicate key "a" at a: each key may appear once in an object`},
		"escaped upper case":   {`{"a":1,"\u0041":2}`, "A", `duplicate key "A" at A: "a" is the same field (keys match fields regardless of case)`},
		"escaped quote":        {`{"a\"b":1,"a\u0022B":2}`, `a"B`, `duplicate key "a\"B" at a"B: "a\"b" is the same field (keys match fields regardless of case)`},
		"escapes that differ":  {`{"a\nb":1,"a\tb":2,"a\/b":3,"a/b":4}`, "a/b", `duplicate key "a/b" at a/b: each key may appear once in an object`},
		"unicode case":         {`{"Émile":1,"émile":2}`, "émile", `duplicate key "émile" at émile: "Émile" is the same field (keys match fields regardless of case)`},
		"long s":               {`{"gpus":1,"gpuſ":8}`, "gpuſ", `duplicate key "gpuſ" at gpuſ: "gpus" is the same field (keys match fields regardless of case)`},
		"dotted capital I":     {`{"i":1,"İ":2}`, "", ""},
		"kelvin sign":          {"{\"k\":1,\"\u212a\":2}", "\u212a", "duplicate key \"\u212a\" at \u212a: \"k\" is the same field (keys match fields regardless of case)"},
		"surrogate pair":       {`{"😀":1,"\ud83d\ude00":2}`, "😀", `duplicate key "😀" at 😀: each key may appear once in an object`},
		"lone surrogates":      {`{"\ud800":1,"\udfff":2}`, "\ufffd", "duplicate key \"\ufffd\" at \ufffd: each key may appear once in an object"},
		"invalid UTF-8":        {"{\"\xff\":1,\"\xfe\":2}", "\ufffd", "duplicate key \"\ufffd\" at \ufffd: each key may appear once in an object"},
		"not the same length":  {`{"ab":1,"abc":2,"a":3}`, "", ""},
		"large object":         {manyKeys(200, `"x":1`), "", ""},
		"large object, repeat": {manyKeys(200, `"K7":1`), "K7", `duplicate key "K7" at K7: "k7" is the same field (keys match fields regardless of case)`},
		"large, escaped":       {manyKeys(100, `"k\u0039\u0039":1`), "k99", `duplicate key "k99" at k99: each key may appear once in an object`},
		"as deep as allowed":   {nested("[", "]", maxJSONDepth, "1"), "", ""},
		"too deep (arrays)":    {nested("[", "]", maxJSONDepth+1, ""), deepArray, fmt.Sprintf("JSON nested deeper than %d levels", maxJSONDepth)},
		"too deep (objects)":   {nested(`{"a":`, "}", maxJSONDepth, "{}"), deepObject, fmt.Sprintf("JSON nested deeper than %d levels", maxJSONDepth)},
		"too deep, truncated":  {strings.Repeat("[", maxJSONDepth+1), deepArray, fmt.Sprintf("JSON nested deeper than %d levels", maxJSONDepth)},
		"malformed after":      {`{"a":1,"a"`, "a", `duplicate key "a" at a: each key may appear once in an object`},
		"malformed before":     {`{"a":1 "b":2,"a":3}`, "", ""},
		"bad escape before":    {`{"\x":1,"a":1,"a":2}`, "", ""},
		"control byte before":  {"{\"v\":\"\x01\",\"a\":1,\"a\":2}", "", ""},
		"bad number before":    {`{"n":01,"a":1,"a":2}`, "", ""},
		"trailing comma":       {`{"a":[1,],"a":2}`, "", ""},
		"missing colon":        {`{"a" 1,"a":2}`, "", ""},
		"trailing data":        {`{"a":1} {"a":1,"a":2}`, "", ""},
		"a scalar":             {`"x"`, "", ""},
		"nothing":              {"  ", "", ""},
		"truncated":            {`{"a":{"b":`, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := duplicateKeys([]byte(tc.body))
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("duplicateKeys = %v, want nil", err)
				}
			} else {
				var de *domain.Error
				if !errors.As(err, &de) {
					t.Fatalf("duplicateKeys = %v, want a refusal", err)
				}
				if de.Code != domain.CodeInvalidArgument || de.Field != tc.field || de.Message != tc.msg {
					t.Fatalf("duplicateKeys = %s field %q: %q, want field %q: %q", de.Code, de.Field, de.Message, tc.field, tc.msg)
				}
			}
			if d := agree([]byte(tc.body)); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// duplicateKeysSeeds are bodies for the differential test and the fuzzer's
// corpus: every shape the two walks could tell apart on.
func duplicateKeysSeeds(tb testing.TB) []string {
	seeds := []string{
		``, ` `, `{}`, `[]`, `{`, `[`, `}`, `]`, `,`, `:`, `"`, `"a"`, `1`, `-`, `true`, `nul`,
		`{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"a":1,"b":2,"a":3}`, `{"a" : 1 , "a" : 2}`,
		" {\t\"a\"\r\n:1,\n\"a\":2}", `{"a":1,}`, `{,"a":1}`, `{"a"}`, `{"a":}`, `{"a"::1,"a":2}`, `{"a":1 "a":2}`,
		`{"a":1,"a"`, `{"a":1,"a":`, `{"a":1,"a`, `{"a":1,"a\`, `{"a":1,"\u00`, `{"a":[1,2,{"b":1,"B":2}]}`,
		`[1,2,3,{"a":1,"a":1}]`, `[1,,2]`, `[1 2]`, `[1,]`, `[{"a":1}{"a":1,"a":2}]`, `[[],[[]],{"":{"":1,"":2}}]`,
		`{"a":{"a":{"a":1}},"a":2}`, `{"a":[],"b":{},"a":null}`, `{"a":"}","a":"{"}`, `{"a":"\"","a":"\\"}`,
		`{"\u0061":1,"a":2}`, `{"\u0041":1,"a":2}`, `{"\u00e9":1,"\u00c9":2}`, `{"é":1,"\u00c9":2}`,
		`{"\ud83d\ude00":1,"😀":2}`, `{"\ud83d":1,"\ude00":2}`, `{"\ud83dx":1,"\ufffdx":2}`, `{"\ud83d\u0041":1,"\ufffda":2}`,
		`{"\ud83d\ud83d":1,"\ufffd\ufffd":2}`, `{"\uDBFF\uDFFF":1,"\udbff\udfff":2}`, `{"\uD83D\uDE00":1,"\ud83d\ude00x":2}`,
		"{\"\xff\":1,\"\xfe\":2}", "{\"\xc3\":1,\"\ufffd\":2}", "{\"\xe2\x84\":1,\"\ufffd\ufffd\":2}",
		"{\"k\":1,\"\u212a\":2}", "{\"\u212a\":1,\"\\u212A\":2}", "{\"s\":1,\"\u017f\":2}", "{\"ß\":1,\"ẞ\":2}", `{"gpus":1,"gpuſ":8}`, `{"S":1,"ſ":2}`, `{"ſ":1,"\u017F":2}`, `{"ǅ":1,"ǆ":2,"Ǆ":3}`, `{"Ω":1,"\u2126":2}`,
		"{\"\u0130\":1,\"i\":2}", "{\"\u0130\":1,\"i\u0307\":2}", "{\"\u03a3\":1,\"\u03c2\":2,\"\u03c3\":3}",
		`{"a\/b":1,"a/b":2}`, `{"a\b":1,"a\f":2,"a\n":3,"a\r":4,"a\t":5,"a\b":6}`, `{"\x":1}`, `{"\u12":1}`, `{"\u12g4":1}`,
		"{\"a\x01\":1}", "{\"a\x01\":1,\"b\":1,\"b\":2}", "{\"v\":\"\t\",\"b\":1,\"b\":2}", "{\"v\":\"\x1f\",\"b\":1,\"b\":2}",
		`{"v":"\u12G4","b":1,"b":2}`, `{"v":"\q","b":1,"b":2}`, `{"v":"\u0000","b":1,"b":2}`, `{"v":"\uD800","b":1,"b":2}`,
		`{"v":[true,false,null,-1.5e+7,"x",{},[]],"b":1,"b":2}`, "{\"a\x7f\":1,\"a\x7f\":2}", `{"n":-0,"n":1}`, `{"n":01,"a":1,"a":2}`, `{"n":1.,"a":1,"a":2}`,
		`{"n":1e,"a":1,"a":2}`, `{"n":1e+,"a":1,"a":2}`, `{"n":-,"a":1,"a":2}`, `{"n":1.5e-3,"n":2}`, `{"n":2E+10,"N":1}`,
		`{"n":.5,"a":1,"a":2}`, `{"n":+1,"a":1,"a":2}`, `{"n":1.5.3}`, `{"t":true,"t":false}`, `{"t":tru,"a":1,"a":2}`,
		`{"t":truex,"a":1,"a":2}`, `{"t":nullnull}`, `{"a":1} {"a":1,"a":2}`, `{"a":1}garbage`, `[1]]`, `{"a":1}}`,
		`{"a":[}`, `{"a":{]}`, `[{"a":1]`, `{"a":1,"b":[1,2,{"c":{"d":[{"e":1,"E":2}]}}]}`, "\ufeff{\"a\":1,\"a\":2}",
		`{"tenant":"acme","workspace":"research","gpus":1,"gpus":8}`, `{"role":"member","Role":"admin"}`,
		manyKeys(31, `"k0":1`), manyKeys(32, `"k0":1`), manyKeys(33, `"k0":1`), manyKeys(33, `"k32":1`), manyKeys(33, `"x":1`),
		manyKeys(64, `"K63":1`), manyKeys(65, `"k\u0036\u0034":1`), manyKeys(100, `"x":{"k1":1,"k1":2}`), manyKeys(100, `"x":[`),
		`{"a":` + manyKeys(40, "") + `,"b":` + manyKeys(40, "") + `,"a":1}`,
		nested("[", "]", maxJSONDepth, ""), nested("[", "]", maxJSONDepth+1, ""), nested(`{"a":`, "}", maxJSONDepth-1, "{}"),
		nested(`{"a":`, "}", maxJSONDepth, "{}"), nested(`{"a":[`, "]}", maxJSONDepth/2, "{}"), nested(`[{"":`, "}]", maxJSONDepth/2, "[]"),
		strings.Repeat("{", maxJSONDepth+1), strings.Repeat(`{"a":`, maxJSONDepth) + `1,"a":2`,
	}
	body := string(submitBody(tb))
	seeds = append(seeds, body, body[:len(body)/2], body+" ", strings.Replace(body, `"gpus"`, `"gpus":1,"GPUs"`, 1))
	return seeds
}

// TestDuplicateKeysAgreesWithOld: on every seed and on each of its prefixes
// (truncated bodies), the scanner refuses exactly when the old walk (with
// strings.EqualFold for its strings.ToLower) does, with the same error.
func TestDuplicateKeysAgreesWithOld(t *testing.T) {
	for _, s := range duplicateKeysSeeds(t) {
		step := 1
		if len(s) > 2000 {
			// Deep bodies: some prefixes (the old walk's paths make each
			// cost the square of its depth).
			step = len(s) / 7
		}
		for n := len(s); n >= 0; n -= step {
			if d := agree([]byte(s[:n])); d != "" {
				t.Fatalf("body %.80q (%d bytes): %s", s[:n], n, d)
			}
		}
	}
}

// FuzzDuplicateKeys: the scanner agrees with the old walk (with
// strings.EqualFold) on any input.
func FuzzDuplicateKeys(f *testing.F) {
	for _, s := range duplicateKeysSeeds(f) {
		if len(s) < 4096 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if d := agree(b); d != "" {
			t.Fatal(d)
		}
	})
}

// TestDuplicateKeysAllocatesNothing: a valid submit body costs the check
// no allocation (the old walk made about 70).
func TestDuplicateKeysAllocatesNothing(t *testing.T) {
	body := submitBody(t)
	nestedBody := []byte(`{"a":[{"b":{"c":[1,2,{"d":"\u00e9\ud83d\ude00"}]}},{"B":null}],"A\u0062":true}`)
	for _, b := range [][]byte{body, nestedBody} {
		if n := testing.AllocsPerRun(100, func() {
			if err := duplicateKeys(b); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("duplicateKeys(%.40q...) allocates %v times a call, want 0", b, n)
		}
	}
}

// BenchmarkStrictUnmarshalSubmit: the strict decode of a submit body into
// the JobSpec the handler decodes into, with the old duplicate-key walk
// and with the scanner.
// The bodies: most fields (submitBody) and `bench submit`'s own.
func BenchmarkStrictUnmarshalSubmit(b *testing.B) {
	benchBody, err := json.Marshal(domain.JobSpec{Tenant: "bench", Workspace: "load", GPUs: 8, GPUsPerNode: 8})
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct {
		name string
		b    []byte
	}{{"full", submitBody(b)}, {"bench", benchBody}} {
		for _, bc := range []struct {
			name string
			dup  func([]byte) error
		}{{"old", oldDuplicateKeys}, {"new", duplicateKeys}} {
			b.Run(body.name+"/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body.b)))
				for b.Loop() {
					if err := bc.dup(body.b); err != nil {
						b.Fatal(err)
					}
					var spec domain.JobSpec
					if err := strictDecode(body.b, &spec); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDuplicateKeys: the duplicate-key check alone on a submit body.
func BenchmarkDuplicateKeys(b *testing.B) {
	body := submitBody(b)
	for _, bc := range []struct {
		name string
		dup  func([]byte) error
	}{{"old", oldDuplicateKeys}, {"new", duplicateKeys}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := bc.dup(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
