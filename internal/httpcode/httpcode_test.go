package httpcode_test

import (
	"net/http"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/httpcode"
)

// TestStatus pins each code's status: clients and the docs rely on them.
func TestStatus(t *testing.T) {
	for code, want := range map[domain.Code]int{
		domain.CodeInvalidArgument:      http.StatusBadRequest,
		domain.CodeUnauthenticated:      http.StatusUnauthorized,
		domain.CodeTokenExpired:         http.StatusUnauthorized,
		domain.CodePermissionDenied:     http.StatusForbidden,
		domain.CodeNotFound:             http.StatusNotFound,
		domain.CodeAlreadyExists:        http.StatusConflict,
		domain.CodeFailedPrecondition:   http.StatusConflict,
		domain.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
		domain.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
		domain.CodeUnavailable:          http.StatusServiceUnavailable,
		domain.CodeInternal:             http.StatusInternalServerError,
		"no_such_code":                  http.StatusInternalServerError,
	} {
		if got := httpcode.Status(code); got != want {
			t.Errorf("Status(%s) = %d, want %d", code, got, want)
		}
	}
}

// TestAnswersListEachCodeOnce: a code in two answers would make the
// OpenAPI document disagree with the server.
func TestAnswersListEachCodeOnce(t *testing.T) {
	seen := map[domain.Code]string{}
	for _, a := range httpcode.Answers() {
		for _, c := range a.Codes {
			if prev, ok := seen[c]; ok {
				t.Errorf("code %s is in answers %s and %s", c, prev, a.Name)
			}
			seen[c] = a.Name
		}
	}
}
