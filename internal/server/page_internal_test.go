package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestPageLimit: no limit is the configured page, a limit above MaxPage
// is MaxPage, and a limit that is not a positive integer is refused
// naming the field, the value and the rule.
func TestPageLimit(t *testing.T) {
	for _, tc := range []struct {
		query    string
		listPage int
		want     int
		err      string // a part of the refusal
	}{
		{"", 0, DefaultPage, ""},
		{"", 7, 7, ""},
		{"", MaxPage + 5, MaxPage, ""},
		{"?limit=1", 7, 1, ""},
		{"?limit=10000", 0, MaxPage, ""},
		{"?limit=10001", 0, MaxPage, ""},
		{"?limit=100000", 0, MaxPage, ""},
		{"?limit=0", 0, 0, "limit is 0; it must be at least 1"},
		{"?limit=-3", 0, 0, "limit is -3; it must be at least 1"},
		{"?limit=ten", 0, 0, `limit="ten" is not an integer`},
	} {
		s := &Server{cfg: Config{ListPage: tc.listPage}}
		got, err := s.pageLimit(httptest.NewRequest("GET", "/v1/jobs"+tc.query, nil))
		if tc.err != "" {
			var de *domain.Error
			if !errors.As(err, &de) || de.Field != "limit" || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want a refusal of field limit saying %q", tc.query, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q (page %d): %d, %v; want %d", tc.query, tc.listPage, got, err, tc.want)
		}
	}
}

// TestContinueTokens: a token reads back as its parts, whatever text a
// part holds, and is refused, naming continue, by another list or with
// another number of parts.
func TestContinueTokens(t *testing.T) {
	parts := []string{"acme", "a:b/c d%", "", "tenant-admin:tok-1"}
	tok := continueKey("usage-job", parts...)
	req := func(tok string) *http.Request {
		return httptest.NewRequest("GET", "/v1/usage?continue="+url.QueryEscape(tok), nil)
	}
	got, err := readContinueKey(req(tok), "usage-job", len(parts))
	if err != nil || !slices.Equal(got, parts) {
		t.Fatalf("read back %q, %v; want %q", got, err, parts)
	}
	if n, err := readContinue(req(continueToken("jobs", 42)), "jobs"); err != nil || n != 42 {
		t.Fatalf("a jobs token: %d, %v; want 42", n, err)
	}
	for _, tc := range []struct {
		name, tok, list string
		n               int
	}{
		{"another list", tok, "usage-tenant", len(parts)},
		{"fewer parts", tok, "usage-job", len(parts) - 1},
		{"a jobs token for the queue", continueToken("jobs", 42), "queue", 3},
		{"not base64", "%%%", "queue", 3},
		{"a bad escape", base64.RawURLEncoding.EncodeToString([]byte("queue:1:%zz:3")), "queue", 3},
	} {
		var de *domain.Error
		if _, err := readContinueKey(req(tc.tok), tc.list, tc.n); !errors.As(err, &de) || de.Field != "continue" {
			t.Errorf("%s: %v, want a refusal of field continue", tc.name, err)
		}
	}
}
