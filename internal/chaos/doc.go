// Package chaos checks that the job API is linearizable while the control
// plane loses its leader: a porcupine model of the API (model.go) and a test
// that drives three real servers on loopback with concurrent clients while
// a fault loop kills and restarts the leader (chaos_test.go).
//
// The model is the API's contract as a client sees it, one operation at a
// time: job IDs are handed out in order, a submit retried with the same
// Idempotency-Key returns the same job, a job never moves backwards through
// its states, only a cancel makes a job Cancelled and nothing moves it
// afterwards, and an answer of "unavailable" to a cancel means nothing was
// applied. Operations whose outcome the client cannot know (a timeout, a
// dropped connection, "may or may not have been applied") stay pending:
// the checker may place them anywhere after their call, or never.
//
// Run it with `make chaos` (part of `make test`); `go test -short` skips it.
package chaos
