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
