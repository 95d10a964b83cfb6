package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// acceptHeader asks for protobuf first, then OpenMetrics, then text, as
// Prometheus does; expfmt decodes whichever the exporter answers.
const acceptHeader = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,` +
	`application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.1`

// maxScrapeBytes bounds one answer: a switch exporter with thousands of
// ports answers a few MB.
const maxScrapeBytes = 64 << 20

// Run scrapes every target on its interval until ctx ends. Each target
// has its own loop, so a slow one delays no other.
//
// It scrapes with a client of its own, not http.DefaultClient: no proxy
// from the environment (exporters sit on the management network, and an
// HTTPS_PROXY set for the server's own egress must not carry them), and
// its idle connections are closed when Run ends, so a member that loses
// leadership keeps no connection to any exporter.
func (s *Store) Run(ctx context.Context) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 1 // one loop per target: one connection each
	defer tr.CloseIdleConnections()
	s.RunWith(ctx, &http.Client{Transport: tr})
}

// RunWith is Run with the HTTP client to scrape with.
func (s *Store) RunWith(ctx context.Context, client *http.Client) {
	var wg sync.WaitGroup
	for i := range s.cfg.Targets {
		t := &s.cfg.Targets[i]
		s.mu.RLock() // pushes add sources concurrently
		src := s.sources[t.Name]
		s.mu.RUnlock()
		wg.Go(func() { s.loop(ctx, client, t, src) })
	}
	wg.Wait()
}

func (s *Store) loop(ctx context.Context, client *http.Client, t *Target, src *source) {
	failing := false
	for {
		err := s.scrape(ctx, client, t, src)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && !failing:
			s.log.Warn("telemetry: scrape failed", "target", t.Name, "url", t.URL, "err", err)
		case err == nil && failing:
			s.log.Info("telemetry: scrape recovered", "target", t.Name)
		}
		failing = err != nil
		// A timer armed after each scrape, not a ticker: a scrape that
		// takes long delays the next instead of piling up.
		timer, c := s.clock.NewTimer(t.Interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c:
		}
	}
}

// scrape fetches one answer and ingests it. The timeout runs on the
// store's clock.
func (s *Store) scrape(ctx context.Context, client *http.Client, t *Target, src *source) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := s.clock.AfterFunc(t.Timeout, func() {
		cancel(fmt.Errorf("no answer within the timeout (%s)", t.Timeout))
	})
	fams, at, err := s.fetch(ctx, client, t, src)
	// The answer is read: the timeout is over before the ingest (or the
	// failure) wakes the store's readers, so whoever steps a fake clock
	// after that sees the loop's next timer only.
	timer.Stop()
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", c, err)
		}
		s.failed(src, err)
		return err
	}
	s.ingest(src, fams, at)
	return nil
}

func (s *Store) fetch(ctx context.Context, client *http.Client, t *Target, src *source) ([]*dto.MetricFamily, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", "jobfabric-telemetry")
	if t.BearerTokenFile != "" {
		b, err := os.ReadFile(t.BearerTokenFile)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, time.Time{}, fmt.Errorf("GET %s: %s", t.URL, resp.Status)
	}
	at := s.clock.Now()
	fams, err := decode(io.LimitReader(resp.Body, maxScrapeBytes), resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("GET %s: %w", t.URL, err)
	}
	return fams, at, nil
}
