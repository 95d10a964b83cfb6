package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// ContinueHeader carries the token of the next page of a list answered
// with a limit; no header means the list is complete. The body stays the
// list itself, so a client that never pages reads it as before.
const ContinueHeader = "Jobfabric-Continue"

// maxPage bounds limit on paged lists.
const maxPage = 100000

// paged is a handler's answer that has a next page.
type paged struct {
	v    any
	next string // continue token; "" on the last page
}

// continueToken is opaque to clients: the list it belongs to and the
// position to resume from, so a token of one list is refused by another.
func continueToken(list string, pos uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(list + ":" + strconv.FormatUint(pos, 10)))
}

// readContinue decodes the continue query parameter of list; 0 when absent.
func readContinue(r *http.Request, list string) (uint64, error) {
	raw := r.URL.Query().Get("continue")
	if raw == "" {
		return 0, nil
	}
	bad := domain.Invalid("continue", "continue token %q is not one this server gave for %s: pass the %s header of the previous page as is", raw, list, ContinueHeader)
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return 0, bad
	}
	kind, pos, ok := strings.Cut(string(b), ":")
	if !ok || kind != list {
		return 0, bad
	}
	n, err := strconv.ParseUint(pos, 10, 64)
	if err != nil || n == 0 {
		return 0, bad
	}
	return n, nil
}
