// Package tlstest creates throwaway certificates for tests: a fresh CA and a
// certificate signed by it, written as PEM files to a directory.
//
// It is for tests only; keys are generated per call and nothing is cached, so
// two calls yield two CAs that do not trust each other (useful for negative
// tests).
package tlstest
