package store

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
)

// levelTrace sits below slog.LevelDebug: raft's trace output (every RPC)
// would drown jobfabric's own debug logs.
const levelTrace = slog.LevelDebug - 4

// hclogAdapter sends raft's hclog output to slog. Raft's Info messages are
// routine (elections, replication set-up), so they are demoted to Debug; only
// warnings and errors keep their level.
type hclogAdapter struct {
	h       slog.Handler
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogAdapter(l *slog.Logger, name string) *hclogAdapter {
	return &hclogAdapter{h: l.Handler().WithAttrs([]slog.Attr{slog.String("logger", name)}), name: name}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return levelTrace
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // Debug, Info, NoLevel
		return slog.LevelDebug
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	l := slogLevel(level)
	if l > slog.LevelDebug && closedConn(args) {
		// A peer that shut down closes its connections: raft reports each
		// at error level though nothing is wrong.
		l = slog.LevelDebug
	}
	ctx := context.Background()
	if !a.h.Enabled(ctx, l) {
		return
	}
	// pc 0: a source location would point at this adapter, not at raft.
	r := slog.NewRecord(time.Now(), l, msg, 0)
	r.Add(args...)
	_ = a.h.Handle(ctx, r) // nowhere to report a failing log handler
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return a.h.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	r := slog.NewRecord(time.Time{}, 0, "", 0)
	r.Add(args...)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(at slog.Attr) bool { attrs = append(attrs, at); return true })
	implied := append(append([]any(nil), a.implied...), args...)
	return &hclogAdapter{h: a.h.WithAttrs(attrs), name: a.name, implied: implied}
}

func (a *hclogAdapter) Name() string { return a.name }

// Named and ResetNamed add a "sublogger" attribute rather than renaming:
// slog handlers cannot drop an attribute already attached.
func (a *hclogAdapter) Named(name string) hclog.Logger {
	full := name
	if a.name != "" {
		full = a.name + "." + name
	}
	return &hclogAdapter{h: a.h.WithAttrs([]slog.Attr{slog.String("sublogger", name)}), name: full, implied: a.implied}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{h: a.h.WithAttrs([]slog.Attr{slog.String("sublogger", name)}), name: name, implied: a.implied}
}

// SetLevel is a no-op: the slog handler owns the level.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelDebug
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = slogLevel(opts.ForceLevel)
	}
	return slog.NewLogLogger(a.h, level)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}

func closedConn(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok && (errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)) {
			return true
		}
	}
	return false
}
