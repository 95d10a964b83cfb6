package server

import (
	"errors"
	"net/http/httptest"
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
