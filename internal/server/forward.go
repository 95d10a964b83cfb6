package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// forwardedHeader marks a request a follower passed to the leader; a
// member that is not leader either answers 503 instead of forwarding again
// (no loops during elections).
const forwardedHeader = "X-Jobfabric-Forwarded-By"

type targetKey struct{}

// forwarder sends requests from a follower to the leader's API.
type forwarder struct {
	client *http.Client
	proxy  *httputil.ReverseProxy
}

func newForwarder(peerTLS *tls.Config) *forwarder {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = peerTLS.Clone() // its own: HTTP/2 set-up writes NextProtos into it
	tr.MaxIdleConnsPerHost = 64
	f := &forwarder{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	f.proxy = &httputil.ReverseProxy{
		Transport: tr,
		// Flush every write at once: a watch streams events for as long as
		// the job lives, and an event held in a buffer is an event late.
		// (The proxy detects text/event-stream by itself; this does not
		// depend on it. Other answers only flush in smaller pieces.)
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(targetKey{}).(*url.URL))
			pr.Out.Host = pr.Out.URL.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			if retrySafe(r.Context()) || (errors.As(err, &op) && op.Op == "dial") {
				// Nothing was applied: the client may retry.
				writeError(w, domain.Errorf(domain.CodeUnavailable, "forwarding to the leader failed: %v", err))
				return
			}
			writeError(w, domain.Errorf(domain.CodeInternal, "the leader failed while handling the forwarded request; it may or may not have been applied: %v", err))
		},
	}
	return f
}

func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, leaderURL, self string) {
	u, err := url.Parse(leaderURL)
	if err != nil {
		writeError(w, domain.Errorf(domain.CodeInternal, "leader API address %q: %v", leaderURL, err))
		return
	}
	r.Header.Set(forwardedHeader, self)
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, u)))
}

// post sends a JSON body to another member and decodes an API error.
func (f *forwarder) post(ctx context.Context, url, token string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return domain.Invalid("join", "bad join URL %q: %v", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.client.Do(req)
	if err != nil {
		return domain.Errorf(domain.CodeUnavailable, "%v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode < 300 {
		return nil
	}
	var de domain.Error
	if json.Unmarshal(b, &de) == nil && de.Code != "" {
		return &de
	}
	return domain.Errorf(domain.CodeInternal, "%s answered %s: %s", url, resp.Status, bytes.TrimSpace(b))
}

func (s *Server) leaderURL() (string, error) {
	id, _ := s.store.Leader()
	if id == "" {
		return "", domain.Errorf(domain.CodeUnavailable, "no leader is elected; retry shortly")
	}
	m, ok := s.fsm.Member(id)
	if !ok || m.APIAddr == "" {
		return "", domain.Errorf(domain.CodeUnavailable, "leader %s has not published its API address yet; retry shortly", id)
	}
	return m.APIAddr, nil
}
