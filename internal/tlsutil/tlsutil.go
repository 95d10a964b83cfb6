package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// ServerConfig returns a TLS 1.2+ configuration serving the key pair in
// certFile and keyFile.
//
// When caFile is not empty, its certificates verify client certificates
// (tls.VerifyClientCertIfGiven) and, as RootCAs, the servers this config is
// used to dial: Raft peers are both servers and clients of each other, so one
// CA authenticates them in both directions. Callers that must reject clients
// without a certificate set ClientAuth to tls.RequireAndVerifyClientCert, as
// internal/store does for the Raft port.
func ServerConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	b, err := Load(Files{Cert: certFile, Key: keyFile, CA: caFile}, time.Now())
	if err != nil {
		return nil, err
	}
	return b.ServerTLS(), nil
}

// ClientConfig returns a TLS 1.2+ client configuration that verifies servers
// against the certificates in caFile, or against the system pool when caFile
// is empty.
//
// serverName is the name expected in the server's certificate; when empty,
// crypto/tls takes the host of the dialled address, which is what Raft peers
// dialled by IP need.
func ClientConfig(caFile string, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
	}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// loadPool reads a PEM bundle. An empty pool is an error: it would silently
// reject every peer, which is harder to diagnose than a startup failure.
func loadPool(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tlsutil: read CA file: %w", err)
	}
	pool, _, err := parsePool(caFile, data)
	return pool, err
}
