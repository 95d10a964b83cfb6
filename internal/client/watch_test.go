package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// script serves each watch connection the next list of raw SSE chunks,
// then closes it; "" holds the connection open until the client leaves.
func script(t *testing.T, conns ...[]string) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"code":"unauthenticated","message":"no"}`)
			return
		}
		if i >= len(conns) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"code":"not_found","message":"job \"1\" not found"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range conns[i] {
			if chunk == "" {
				<-r.Context().Done()
				return
			}
			fmt.Fprint(w, chunk)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.RetryFor = 0
	return c, &n
}

func ev(state domain.JobState) string {
	return fmt.Sprintf("event: job\ndata: {\"id\":1,\"state\":%q}\n\n", state)
}

func TestWatchParsesReconnectsAndDeduplicates(t *testing.T) {
	c, conns := script(t,
		[]string{": heartbeat\n\n", ev(domain.JobPending), ev(domain.JobPending), "event: other\ndata: {}\n\n", ev(domain.JobRunning)},
		// After the cut the server sends the current job again first.
		[]string{ev(domain.JobRunning), ": heartbeat\n\n", "event: job\r\ndata: {\"id\":1,\r\ndata: \"state\":\"Succeeded\"}\r\n\r\n", ev(domain.JobFailed)},
	)
	var got []domain.JobState
	err := c.Watch(context.Background(), 1, func(j *domain.Job) error {
		got = append(got, j.State)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.JobState{domain.JobPending, domain.JobRunning, domain.JobSucceeded}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v (each change once, stop at the end)", got, want)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one reconnect)", n)
	}
}

func TestWatchEnds(t *testing.T) {
	boom := errors.New("boom")
	cases := map[string]struct {
		conns    [][]string
		fn       func(*domain.Job) error
		timeout  time.Duration
		wantErr  error
		wantCode domain.Code
	}{
		"callback error is returned as is": {
			conns: [][]string{{ev(domain.JobRunning), ""}}, fn: func(*domain.Job) error { return boom }, wantErr: boom,
		},
		"api error is returned without retry": {
			conns: nil, wantCode: domain.CodeNotFound,
		},
		"context ends a quiet stream": {
			conns: [][]string{{ev(domain.JobRunning), ""}}, timeout: 200 * time.Millisecond, wantErr: context.DeadlineExceeded,
		},
		"a stream that ends early and cannot be reopened": {
			conns: [][]string{{ev(domain.JobRunning)}}, wantCode: domain.CodeNotFound,
		},
		"preempted is an end": {
			conns: [][]string{{ev(domain.JobPreempted), ""}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := script(t, tc.conns...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), tc.timeout)
			}
			defer cancel()
			fn := tc.fn
			if fn == nil {
				fn = func(*domain.Job) error { return nil }
			}
			err := c.Watch(ctx, 1, fn)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			case tc.wantCode != "" && domain.CodeOf(err) != tc.wantCode:
				t.Fatalf("err %v, want code %s", err, tc.wantCode)
			case tc.wantErr == nil && tc.wantCode == "" && err != nil:
				t.Fatalf("err %v, want nil", err)
			}
		})
	}
}
