// Package httpcode maps the API's stable error codes (domain.Code) to HTTP
// statuses: one table for the server's answers, its OpenAPI document and
// the console, which must all agree.
package httpcode

import (
	"net/http"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Answer is one documented error answer: its status, its name in the
// OpenAPI document (#/components/responses), and the codes it carries.
type Answer struct {
	Status int
	Name   string
	Codes  []domain.Code
}

// Answers lists the documented error answers in status order. Any other
// code is a 500.
func Answers() []Answer {
	return []Answer{
		{http.StatusBadRequest, "BadRequest", []domain.Code{domain.CodeInvalidArgument}},
		{http.StatusUnauthorized, "Unauthorized", []domain.Code{domain.CodeUnauthenticated, domain.CodeTokenExpired}},
		{http.StatusForbidden, "Forbidden", []domain.Code{domain.CodePermissionDenied}},
		{http.StatusNotFound, "NotFound", []domain.Code{domain.CodeNotFound}},
		{http.StatusConflict, "Conflict", []domain.Code{domain.CodeAlreadyExists, domain.CodeFailedPrecondition}},
		{http.StatusRequestEntityTooLarge, "PayloadTooLarge", []domain.Code{domain.CodePayloadTooLarge}},
		{http.StatusUnsupportedMediaType, "UnsupportedMediaType", []domain.Code{domain.CodeUnsupportedMediaType}},
		{http.StatusTooManyRequests, "TooManyRequests", []domain.Code{domain.CodeRateLimited}},
		{http.StatusServiceUnavailable, "Unavailable", []domain.Code{domain.CodeUnavailable}},
	}
}

// Status is the HTTP status an error of code c is answered with: its
// answer's, or 500.
func Status(c domain.Code) int {
	for _, a := range Answers() {
		if slices.Contains(a.Codes, c) {
			return a.Status
		}
	}
	return http.StatusInternalServerError
}
