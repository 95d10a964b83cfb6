package store

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapterLevels(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	var l hclog.Logger = newHCLogAdapter(slog.New(h), "raft")

	l.Trace("trace-msg")
	l.Debug("debug-msg")
	l.Info("info-msg", "term", 3)
	l.Warn("warn-msg")
	l.Named("transport").With("peer", "n2").Error("error-msg", "error", errors.New("boom"))
	out := buf.String()

	if strings.Contains(out, "trace-msg") {
		t.Error("trace output reached a Debug handler")
	}
	for _, want := range []string{
		`level=DEBUG msg=debug-msg logger=raft`,
		`level=DEBUG msg=info-msg logger=raft term=3`,
		`level=WARN msg=warn-msg`,
		`level=ERROR msg=error-msg logger=raft sublogger=transport peer=n2 error=boom`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !l.IsDebug() || l.IsTrace() || l.GetLevel() != hclog.Debug {
		t.Errorf("IsDebug=%v IsTrace=%v GetLevel=%v", l.IsDebug(), l.IsTrace(), l.GetLevel())
	}
	if got := l.Named("a").Named("b").Name(); got != "raft.a.b" {
		t.Errorf("Name = %q", got)
	}

	buf.Reset()
	warnOnly := newHCLogAdapter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), "raft")
	warnOnly.Info("chatter")
	warnOnly.Warn("kept")
	if out := buf.String(); strings.Contains(out, "chatter") || !strings.Contains(out, "kept") {
		t.Errorf("Warn-level handler got:\n%s", out)
	}
	warnOnly.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("std")
	if !strings.Contains(buf.String(), "level=ERROR msg=std") {
		t.Errorf("standard logger output:\n%s", buf.String())
	}
}
