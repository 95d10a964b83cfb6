package api

import "time"

// TLSStatus is the answer of GET /v1/cluster/tls: the certificates and
// cluster secret the answering member uses now (each member answers for
// itself), and the last refused reload of each.
type TLSStatus struct {
	// Node is the answering member.
	Node string `json:"node" openapi:"required"`
	// PeerAuth is how this member authenticates raft peers (see
	// ClusterView).
	PeerAuth string `json:"peerAuth" openapi:"required"`
	// API is the certificate of the API (and, with mutual TLS, of raft);
	// absent without --tls-cert.
	API *CertStatus `json:"api,omitempty"`
	// RaftSerial and RaftNotAfter describe the certificate this member
	// presents to raft peers: the API's with mutual TLS, one issued under
	// the cluster secret otherwise (valid until 2120: a secret-derived
	// certificate is never renewed for time, only for a new secret).
	RaftSerial   string    `json:"raftSerial,omitempty"`
	RaftNotAfter time.Time `json:"raftNotAfter,omitzero"`
	// Secret describes the cluster secrets in use; absent without
	// --cluster-secret-file.
	Secret *SecretStatus `json:"secret,omitempty"`
}

// CertStatus is a certificate loaded from files.
type CertStatus struct {
	// Cert and CA are the files it was loaded from.
	Cert string `json:"cert" openapi:"required"`
	CA   string `json:"ca,omitempty"`
	// Serial is the certificate's serial number in hex.
	Serial    string    `json:"serial" openapi:"required"`
	Subject   string    `json:"subject" openapi:"required"`
	NotBefore time.Time `json:"notBefore" openapi:"required"`
	NotAfter  time.Time `json:"notAfter" openapi:"required"`
	// CAs is how many certificates the CA file holds.
	CAs int `json:"cas"`
	// LoadedAt is when this certificate was loaded.
	LoadedAt time.Time `json:"loadedAt" openapi:"required"`
	// Reloads counts new certificates taken since start; Errors the
	// refused reloads.
	Reloads uint64 `json:"reloads"`
	Errors  uint64 `json:"errors"`
	// LastError is the last refused reload, cleared by the next good one.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// SecretStatus describes the cluster secrets in use without revealing
// them: each is named by the fingerprint of the CA it derives, so members
// at the same step of a rotation show the same fingerprints.
type SecretStatus struct {
	// File is --cluster-secret-file.
	File string `json:"file" openapi:"required"`
	// Issuing is the fingerprint of the secret this member's raft
	// certificate is issued under (the file's first line).
	Issuing string `json:"issuing" openapi:"required"`
	// Accepted are the fingerprints of the further secrets whose peers
	// are accepted (the file's other lines).
	Accepted []string `json:"accepted,omitempty"`
	// LoadedAt is when these secrets were read.
	LoadedAt time.Time `json:"loadedAt" openapi:"required"`
	// Reloads counts new secret files taken since start; Errors the
	// refused ones.
	Reloads uint64 `json:"reloads"`
	Errors  uint64 `json:"errors"`
	// LastError is the last refused reload, cleared by the next good one.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}
