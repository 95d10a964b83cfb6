package topology

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Fingerprint is the sha256 (hex) of the canonical JSON of t: object keys
// sorted, nulls and empty lists and objects dropped. Two topologies that
// decode to the same thing have the same fingerprint even when one file
// wrote "cables: []" and the other left it out, or when one went through the
// replicated log (which turns empty lists into nil). Call it on a normalized
// topology so defaults do not count as changes.
func Fingerprint(t *domain.Topology) string {
	h := sha256.New()
	b, err := json.Marshal(t)
	if err != nil {
		// Topology holds only strings, numbers, bools and lists: Marshal
		// cannot fail on it.
		panic("topology: marshal: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic("topology: re-decode: " + err.Error())
	}
	c, err := json.Marshal(prune(v)) // encoding/json sorts map keys
	if err != nil {
		panic("topology: canonical marshal: " + err.Error())
	}
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil))
}

// prune drops nulls and empty lists and objects, recursively. Zero numbers,
// empty strings and false are kept: a nil *int and a zero rail differ.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if p := prune(e); p == nil {
				delete(x, k)
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i, e := range x {
			x[i] = prune(e)
		}
	}
	return v
}
