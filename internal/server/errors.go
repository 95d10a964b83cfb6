package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// httpStatus maps stable error codes to HTTP statuses.
func httpStatus(c domain.Code) int {
	switch c {
	case domain.CodeInvalidArgument:
		return http.StatusBadRequest
	case domain.CodeUnauthenticated, domain.CodeTokenExpired:
		return http.StatusUnauthorized
	case domain.CodePermissionDenied:
		return http.StatusForbidden
	case domain.CodeNotFound:
		return http.StatusNotFound
	case domain.CodeAlreadyExists, domain.CodeFailedPrecondition:
		return http.StatusConflict
	case domain.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case domain.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case domain.CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// Compact: the CLI formats for people; scripts and clients need no indent.
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		de = domain.Errorf(domain.CodeInternal, "%v", err)
	}
	writeJSON(w, httpStatus(de.Code), de)
}

var (
	errUnauthenticated = &domain.Error{Code: domain.CodeUnauthenticated, Message: "a valid bearer token is required (Authorization: Bearer jf_...)"}
	errAdminOnly       = &domain.Error{Code: domain.CodePermissionDenied, Message: "this operation needs an admin token"}
)
