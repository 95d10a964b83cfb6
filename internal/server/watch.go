package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

const (
	// watchHeartbeat keeps idle streams alive through proxies and lets a
	// client tell a quiet job from a dead connection.
	watchHeartbeat = 15 * time.Second
	// streamWriteTimeout bounds each write of a stream: a client that stops
	// reading is dropped, however long the stream has lasted.
	streamWriteTimeout = 30 * time.Second
)

// stream prepares a long-lived answer: the server's whole-request read and
// write timeouts would cut it, so the read deadline is lifted (the request
// has been read) and each write gets its own deadline instead; the request
// context ends when the server shuts down, so Close does not wait for
// streams. end releases what stream set up.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.streams, cancel)
	return &streamWriter{ResponseWriter: w, rc: rc}, r.WithContext(ctx), func() { stop(); cancel() }
}

// streamWriter renews the write deadline before every write and flush.
type streamWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w *streamWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController (and so the reverse proxy)
// calls to flush.
func (w *streamWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return w.rc.Flush()
}

func (w *streamWriter) Flush() { _ = w.FlushError() }

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watchJob streams a job as Server-Sent Events: the job now, then after
// every change, until it ends or the client goes away. Changes come from the
// state machine's broadcast, never from polling.
func (s *Server) watchJob(w http.ResponseWriter, r *http.Request, p *principal) error {
	j, err := s.visibleJob(r, p)
	if err != nil {
		return err
	}
	id := j.ID
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx and alike: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	hb := time.NewTicker(watchHeartbeat)
	defer hb.Stop()
	// A token with an end ends its streams then, not at the next heartbeat.
	var expiry <-chan time.Time
	if at := p.tok.ExpiresAt; at != nil {
		t, c := s.clock.NewTimer(max(at.Sub(s.clock.Now()), 0))
		defer t.Stop()
		expiry = c
	}
	var last []byte
	for {
		changed := s.fsm.Changed() // before the read: no change slips between
		j, ok := s.fsm.Job(id)
		if !ok {
			return nil // jobs are never deleted; a restored older snapshot could lack it
		}
		b, err := json.Marshal(j)
		if err != nil {
			s.log.Error("encode watched job", "job", id, "err", err)
			return nil
		}
		// Most commands are about other jobs: send only what changed.
		if !bytes.Equal(b, last) {
			if !send(sseEvent("job", b)) {
				return nil
			}
			last = b
		}
		if j.State.Ended() {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-changed:
		case <-expiry:
			return nil
		case <-hb.C:
			if !s.stillWatching(p) {
				// Leadership moved (the client reconnects and is forwarded
				// to the new leader), or the token was revoked.
				return nil
			}
			if !send([]byte(": heartbeat\n\n")) {
				return nil
			}
		}
	}
}

// stillWatching re-checks, once per heartbeat, what the stream was opened
// on: this server still leads (its state is the latest) and the caller's
// token still exists and has not expired (revoking it, or deleting its
// tenant, ends its streams within a heartbeat).
func (s *Server) stillWatching(p *principal) bool {
	if !s.store.IsLeader() {
		return false
	}
	t, ok := s.fsm.Token(p.tok.ID)
	return ok && !t.Expired(s.clock.Now())
}

// sseEvent frames one event; data is one line (compact JSON escapes
// newlines).
func sseEvent(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+16)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
