// Package client is the Go client of the jobfabric API, used by the CLI, the
// benchmarks and the tests. API errors come back as *domain.Error so callers
// branch on codes.
package client
