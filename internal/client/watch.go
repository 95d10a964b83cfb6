package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

const (
	// watchIdle: the server sends a heartbeat every 15s, so a stream
	// silent for this long is a dead connection, reopened.
	watchIdle = 45 * time.Second
	// maxEventSize bounds one event (a job, its placement included).
	maxEventSize = 8 << 20
)

// Watch calls fn with the job now and after every change of it, until the
// job ends (Succeeded, Failed, Cancelled or Preempted: Watch returns nil), fn
// returns an error (Watch returns it as is), or ctx ends (ctx.Err()). A
// stream cut by a leader change or the network is reopened, trying for up
// to RetryFor; a job unchanged since fn last saw it is not passed again, so
// fn sees each change once, in order, though a reconnect may skip states
// the job passed through meanwhile.
func (c *Client) Watch(ctx context.Context, id uint64, fn func(*domain.Job) error) error {
	path := "/v1/jobs/" + strconv.FormatUint(id, 10) + "/watch"
	var last []byte
	var failingSince time.Time
	backoff := 50 * time.Millisecond
	for {
		received, err := c.watchOnce(ctx, path, &last, fn)
		if err == nil {
			return nil
		}
		var ce callbackError
		switch {
		case errors.As(err, &ce):
			return ce.err
		case ctx.Err() != nil:
			return ctx.Err()
		case domain.CodeOf(err) != domain.CodeUnavailable:
			return err
		}
		if received {
			// The stream worked until it was cut: reopen it, with a new
			// allowance of failures.
			failingSince, backoff = time.Time{}, 50*time.Millisecond
		} else if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if !failingSince.IsZero() && time.Since(failingSince)+backoff > c.RetryFor {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// callbackError carries fn's error out of the stream untouched.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// watchOnce reads one stream. It returns nil when the job ended, and
// reports whether any event arrived (the stream worked) before it failed.
func (c *Client) watchOnce(ctx context.Context, path string, last *[]byte, fn func(*domain.Job) error) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return false, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return false, &domain.Error{Code: domain.CodeUnavailable, Message: fmt.Sprintf("cannot reach %s: %v", c.base, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, answerError(http.MethodGet, path, resp.Status, b)
	}
	idle := time.AfterFunc(watchIdle, cancel)
	defer idle.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventSize)
	var event string
	var data []byte
	for sc.Scan() {
		idle.Reset(watchIdle)
		line := sc.Bytes()
		switch {
		case len(line) == 0: // an event is complete
			if event == "job" && data != nil {
				received = true
				var j domain.Job
				if !bytes.Equal(data, *last) {
					if err := json.Unmarshal(data, &j); err != nil {
						return received, fmt.Errorf("decode watched job: %w", err)
					}
				}
				// A reopened stream may come from a server that has not yet
				// applied what the old one showed (a new leader applies its
				// log a moment after it wins): an older state is skipped.
				if !bytes.Equal(data, *last) && !j.UpdatedAt.Before(lastUpdated(*last)) {
					*last = append((*last)[:0], data...)
					if err := fn(&j); err != nil {
						return received, callbackError{err}
					}
					if j.State.Ended() {
						return received, nil
					}
				}
			}
			event, data = "", nil
		case line[0] == ':': // a comment: the heartbeat
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				event = string(value)
			case "data":
				if data == nil {
					data = []byte{} // an empty data line still makes an event
				} else {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
	why := "the server closed it"
	if err := sc.Err(); err != nil {
		why = err.Error()
	}
	return received, &domain.Error{Code: domain.CodeUnavailable, Message: fmt.Sprintf("the watch of %s ended before the job did: %s", path, why)}
}

// lastUpdated is the UpdatedAt of the last job shown (zero before any).
func lastUpdated(last []byte) time.Time {
	var j struct {
		UpdatedAt time.Time `json:"updatedAt"`
	}
	if len(last) > 0 {
		json.Unmarshal(last, &j)
	}
	return j.UpdatedAt
}
