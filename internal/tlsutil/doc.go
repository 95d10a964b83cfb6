// Package tlsutil builds the TLS configurations jobfabric serves and dials
// with, from PEM files on disk.
//
// The same server configuration is used for the HTTP API and for the Raft
// transport. With a CA file it also verifies client certificates, but only
// when a client presents one: the HTTP API must keep accepting token-only
// clients, while the Raft transport (internal/store) upgrades the requirement
// to a verified certificate so that only cluster members can replicate.
//
// Reloader keeps a certificate, its key and the CA bundle current with
// their files without a restart: each handshake takes the bundle in use,
// and a set of files that fails Load (unreadable, key not matching,
// expired, not yet valid, an empty CA file) is refused, logged, and the
// one in use kept. tlstest issues throwaway CAs and certificates for tests.
package tlsutil
