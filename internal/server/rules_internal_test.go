package server

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/state"
)

// TestHaltExitsTheProcess: without Config.Halt a member that meets an
// entry it cannot apply logs the entry and exits with ExitUnappliable (a
// child process of this test does, so the test sees the exit).
func TestHaltExitsTheProcess(t *testing.T) {
	if os.Getenv("JOBFABRIC_TEST_HALT_CHILD") == "1" {
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		haltFor(Config{}, log.Error)(&state.UnappliableError{Index: 42, Type: "job.frobnicate", Rules: 1, MaxRules: state.RulesLatest, UnknownType: true})
		os.Exit(0) // not reached when the hook exits
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHaltExitsTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBFABRIC_TEST_HALT_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUnappliable {
		t.Fatalf("the child ended with %v, want exit status %d; output:\n%s", err, ExitUnappliable, out)
	}
	for _, want := range []string{"cannot apply the replicated log", "entry 42", "job.frobnicate", "upgrade this member's binary"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's log does not say %q:\n%s", want, out)
		}
	}
	// A hook given in the configuration replaces the exit.
	var got error
	haltFor(Config{Halt: func(err error) { got = err }}, nil)(errors.New("x"))
	if got == nil || got.Error() != "x" {
		t.Fatalf("Config.Halt was not called: %v", got)
	}
}

// BenchmarkProposeRules is what choosing the version adds to every
// command a leader proposes: the raft configuration and the members'
// records, read under the state's read lock.
func BenchmarkProposeRules(b *testing.B) {
	s, err := Start(b.Context(), Config{DataDir: b.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), FabricDriver: "none"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.store.WaitForLeader(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := s.proposeRules(); r != state.RulesLatest {
			b.Fatalf("a single server proposes at %d", r)
		}
	}
}
