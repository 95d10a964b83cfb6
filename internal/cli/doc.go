// Package cli builds the jobfabric command tree (cobra): the server, the
// demo, and the client commands that talk to the API. Output is a table for
// people by default and JSON or YAML for scripts (-o json|yaml).
package cli
