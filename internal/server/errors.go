package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/httpcode"
)

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
	writeJSON(w, httpcode.Status(de.Code), de)
}

var (
	errUnauthenticated = &domain.Error{Code: domain.CodeUnauthenticated, Message: "a valid bearer token is required (Authorization: Bearer jf_...)"}
	errAdminOnly       = &domain.Error{Code: domain.CodePermissionDenied, Message: "this operation needs an admin token"}
)
