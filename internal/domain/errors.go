package domain

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code carried over the API. Callers
// branch on codes, never on messages.
type Code string

// Error codes. Their HTTP statuses are decided by the server package.
const (
	CodeInvalidArgument    Code = "invalid_argument"
	CodeUnauthenticated    Code = "unauthenticated"
	CodePermissionDenied   Code = "permission_denied"
	CodeNotFound           Code = "not_found"
	CodeAlreadyExists      Code = "already_exists"
	CodeFailedPrecondition Code = "failed_precondition"
	CodePayloadTooLarge    Code = "payload_too_large"
	// CodeUnsupportedMediaType: a request body in a Content-Type or
	// Content-Encoding the operation does not take.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeTokenExpired: the bearer token is known but past its expiry.
	CodeTokenExpired Code = "token_expired"
	CodeUnavailable  Code = "unavailable"
	// CodeRateLimited: the caller's address failed authentication too
	// often; Retry-After says when it may try again.
	CodeRateLimited Code = "rate_limited"
	CodeInternal    Code = "internal"
)

// Detail is one problem among several found in one request (e.g. every broken
// rule of a topology file).
type Detail struct {
	Field   string `json:"field,omitempty"`
	Object  string `json:"object,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
}

// Error is the typed error of the whole system: it names the code, the field
// that was wrong (a JSON path such as "gpus" or "sites[0].fabrics[0].cables[3].port")
// and a message a person can act on.
type Error struct {
	Code    Code     `json:"code"`
	Message string   `json:"message"`
	Field   string   `json:"field,omitempty"`
	Details []Detail `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf builds an *Error with a code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid builds an invalid_argument error naming the field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound builds a not_found error for a kind and name ("tenant", "acme").
func NotFound(kind, name string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %q not found", kind, name)}
}

// CodeOf returns the code of err if it wraps an *Error, else CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
