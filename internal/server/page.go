package server

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// ContinueHeader carries the token of the next page of a list answered
// with a limit; no header means the list is complete. The body stays the
// list itself, so a client that never pages reads it as before.
const ContinueHeader = "Jobfabric-Continue"

// Pages bound what one answer copies under the state's read lock (issue
// 18): a list request without limit gets DefaultPage items and the
// continue header, and a limit above MaxPage is clamped to it (the header
// then carries the rest), so no answer copies every job however many the
// state holds. Clamping, not refusing: a client built when the maximum
// was higher (the Slurm bridge asked 20,000) still reads every page.
const (
	DefaultPage = 500
	MaxPage     = 10000
)

// pageLimit reads the limit query parameter of a paged list: absent,
// the server's default page; above MaxPage, MaxPage; below 1 refused.
func (s *Server) pageLimit(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return s.defaultPage(), nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, domain.Invalid("limit", "query parameter limit=%q is not an integer", raw)
	}
	if v < 1 {
		return 0, domain.Invalid("limit", "limit is %d; it must be at least 1 (above %d it is %d: a page holds at most that many)", v, MaxPage, MaxPage)
	}
	return int(min(v, MaxPage)), nil
}

// defaultPage is Config.ListPage, or DefaultPage when unset.
func (s *Server) defaultPage() int {
	if n := s.cfg.ListPage; n > 0 {
		return min(n, MaxPage)
	}
	return DefaultPage
}

// paged is a handler's answer that has a next page.
type paged struct {
	v    any
	next string // continue token; "" on the last page
}

// continueToken is opaque to clients: the list it belongs to and the
// position to resume from, so a token of one list is refused by another.
func continueToken(list string, pos uint64) string {
	return continueKey(list, strconv.FormatUint(pos, 10))
}

// continueKey is continueToken with a position of several parts (a
// queue's order and place in it, a usage row's key), each escaped so a
// part may hold any text.
func continueKey(list string, parts ...string) string {
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = url.QueryEscape(p)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(list + ":" + strings.Join(esc, ":")))
}

// readContinue decodes the continue query parameter of list; 0 when absent.
func readContinue(r *http.Request, list string) (uint64, error) {
	parts, err := readContinueKey(r, list, 1)
	if err != nil || parts == nil {
		return 0, err
	}
	n, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || n == 0 {
		return 0, badContinue(r, list)
	}
	return n, nil
}

// readContinueKey decodes the continue query parameter of list, n parts;
// nil when absent.
func readContinueKey(r *http.Request, list string, n int) ([]string, error) {
	raw := r.URL.Query().Get("continue")
	if raw == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return nil, badContinue(r, list)
	}
	kind, rest, ok := strings.Cut(string(b), ":")
	parts := strings.Split(rest, ":")
	if !ok || kind != list || len(parts) != n {
		return nil, badContinue(r, list)
	}
	for i, p := range parts {
		if parts[i], err = url.QueryUnescape(p); err != nil {
			return nil, badContinue(r, list)
		}
	}
	return parts, nil
}

func badContinue(r *http.Request, list string) error {
	return domain.Invalid("continue", "continue token %q is not one this server gave for %s: pass the %s header of the previous page as is", r.URL.Query().Get("continue"), list, ContinueHeader)
}
