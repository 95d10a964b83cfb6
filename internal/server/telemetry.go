package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// maxPushBody bounds one push: a node's exporters answer well under a
// megabyte; a switch's a few.
const maxPushBody = 16 << 20

// pushMediaTypes are the bodies POST /v1/telemetry/push takes (expfmt
// decodes them).
var pushMediaTypes = []string{
	"text/plain",
	"application/openmetrics-text",
	"application/vnd.google.protobuf",
}

func (s *Server) telemetryRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/telemetry/push", summary: "Push Prometheus exposition text (or OpenMetrics, or delimited protobuf) for a push source of the telemetry config; the answer counts the samples accepted. Admin, a platform runtime, or a node's agent (its series must be on its own node)", access: authed,
			query: []param{
				{"source", "string", "the push source (push: in the telemetry config)"},
				{"device", "string", "the device of series no label places, when the source names none (a node's agent: its node)"},
			},
			rawBody: pushMediaTypes, resp: api.TelemetryPushResult{}, h: s.pushTelemetry},
	}
}

// Telemetry is the server's telemetry store: what the leader scraped and
// was pushed (empty on followers).
func (s *Server) Telemetry() *telemetry.Store { return s.telemetry }

func (s *Server) pushTelemetry(r *http.Request, p *principal) (any, error) {
	var opt telemetry.PushOptions
	switch {
	case p.platform():
		opt.Device = r.URL.Query().Get("device")
	case p.nodeAgent() != "":
		// A node's agent speaks for its own server: whatever device it
		// names, its series are pinned to its node.
		opt = telemetry.PushOptions{Device: p.nodeAgent(), PinDevice: true}
		if d := r.URL.Query().Get("device"); d != "" && d != opt.Device {
			return nil, p.denied("push telemetry for another node")
		}
	default:
		return nil, p.denied("push telemetry")
	}
	source := r.URL.Query().Get("source")
	if source == "" {
		return nil, domain.Invalid("source", "source is required: a push source of the telemetry config")
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
		return nil, &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Encoding",
			Message: fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed", ce)}
	}
	if err := telemetry.CheckContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	b, err := readBody(r, maxPushBody)
	if err != nil {
		return nil, err
	}
	res, err := s.telemetry.PushWith(source, opt, bytes.NewReader(b), r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	return api.TelemetryPushResult{Accepted: res.Accepted, Ignored: res.Ignored, Dropped: res.Dropped}, nil
}

// telemetryLoop scrapes the configured targets while this server leads:
// followers forward pushes and reads to the leader, so only its store is
// read.
func (s *Server) telemetryLoop(ctx context.Context) {
	if len(s.cfg.Telemetry.Targets) == 0 {
		return
	}
	type scraping struct {
		stop context.CancelFunc
		done chan struct{}
	}
	var run *scraping
	halt := func() {
		if run != nil {
			run.stop()
			<-run.done
			run = nil
		}
	}
	defer halt()
	for {
		switch lead := s.store.IsLeader(); {
		case lead && run == nil:
			rctx, stop := context.WithCancel(ctx)
			run = &scraping{stop: stop, done: make(chan struct{})}
			go func(done chan struct{}) { defer close(done); s.telemetry.Run(rctx) }(run.done)
			s.log.Info("telemetry: scraping", "targets", len(s.cfg.Telemetry.Targets))
		case !lead && run != nil:
			halt()
			s.log.Info("telemetry: not the leader; scraping stopped")
		}
		t, fire := s.clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-fire:
		}
	}
}
