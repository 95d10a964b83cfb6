// Package api holds the request and response types of the jobfabric REST API
// that are not domain objects, shared by the server and the client so the
// client never imports server internals.
package api
