package domain

import (
	"fmt"
	"math"
	"testing"
)

func TestValidateName(t *testing.T) {
	cases := map[string]bool{
		"acme": true, "a": true, "a-1": true, "0abc": true,
		"": false, "-a": false, "a-": false, "Acme": false, "a_b": false, "a.b": false, "a b": false,
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk":  true,  // 63
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl": false, // 64
	}
	for name, want := range cases {
		if got := ValidateName("name", name) == nil; got != want {
			t.Errorf("ValidateName(%q) ok=%t, want %t", name, got, want)
		}
	}
}

func TestValidateJobSpec(t *testing.T) {
	base := JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8}
	cases := map[string]struct {
		mod       func(*JobSpec)
		wantField string
	}{
		"valid":            {mod: func(*JobSpec) {}},
		"zero gpus":        {mod: func(s *JobSpec) { s.GPUs = 0 }, wantField: "gpus"},
		"per node divides": {mod: func(s *JobSpec) { s.GPUsPerNode = 3 }, wantField: "gpusPerNode"},
		"per node ok":      {mod: func(s *JobSpec) { s.GPUsPerNode = 4 }},
		"unknown model":    {mod: func(s *JobSpec) { s.GPUModel = "X1" }, wantField: "gpuModel"},
		"priority range":   {mod: func(s *JobSpec) { s.Priority = MaxPriority + 1 }, wantField: "priority"},
		"bad workspace":    {mod: func(s *JobSpec) { s.Workspace = "R&D" }, wantField: "workspace"},
		"time limit":       {mod: func(s *JobSpec) { s.TimeLimitSeconds = 7200 }},
		"negative limit":   {mod: func(s *JobSpec) { s.TimeLimitSeconds = -1 }, wantField: "timeLimitSeconds"},
		"absurd limit":     {mod: func(s *JobSpec) { s.TimeLimitSeconds = MaxSeconds + 1 }, wantField: "timeLimitSeconds"},
		"min runtime":      {mod: func(s *JobSpec) { s.MinRuntimeSeconds = 600 }},
		"negative min":     {mod: func(s *JobSpec) { s.MinRuntimeSeconds = -5 }, wantField: "minRuntimeSeconds"},
		"absurd min":       {mod: func(s *JobSpec) { s.MinRuntimeSeconds = 1 << 40 }, wantField: "minRuntimeSeconds"},
	}
	for name, tc := range cases {
		s := base
		tc.mod(&s)
		err := ValidateJobSpec(&s)
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%s: unexpected %v", name, err)
		case tc.wantField != "" && (err == nil || err.Field != tc.wantField || err.Code != CodeInvalidArgument):
			t.Errorf("%s: got %v, want invalid_argument on %s", name, err, tc.wantField)
		}
	}
}

func TestTokenScope(t *testing.T) {
	cases := map[string]struct {
		role      Role
		tenant    string
		workspace string
		ok        bool
	}{
		"admin":                {RoleAdmin, "", "", true},
		"admin with tenant":    {RoleAdmin, "acme", "", false},
		"tenant admin":         {RoleTenantAdmin, "acme", "", true},
		"tenant admin no ten":  {RoleTenantAdmin, "", "", false},
		"tenant admin with ws": {RoleTenantAdmin, "acme", "r", false},
		"member":               {RoleMember, "acme", "r", true},
		"member no workspace":  {RoleMember, "acme", "", false},
		"unknown role":         {"root", "", "", false},
		"tenant runtime":       {RoleRuntime, "acme", "", true},
		"platform runtime":     {RoleRuntime, "", "", true},
		"runtime with ws":      {RoleRuntime, "acme", "r", false},
		"runtime bad tenant":   {RoleRuntime, "Acme", "", false},
	}
	for name, tc := range cases {
		if got := ValidateTokenScope(tc.role, tc.tenant, tc.workspace) == nil; got != tc.ok {
			t.Errorf("%s: ok=%t, want %t", name, got, tc.ok)
		}
	}
}

func TestJobStateHoldsGPUs(t *testing.T) {
	holds := map[JobState]bool{JobPlaced: true, JobReady: true, JobRunning: true, JobPreempting: true}
	for _, s := range JobStates {
		if s.HoldsGPUs() != holds[s] {
			t.Errorf("%s.HoldsGPUs() = %t, want %t", s, s.HoldsGPUs(), holds[s])
		}
		if want := holds[s] && s != JobPreempting; s.Stoppable() != want {
			t.Errorf("%s.Stoppable() = %t, want %t", s, s.Stoppable(), want)
		}
		if s.HoldsGPUs() && s.Terminal() {
			t.Errorf("%s both holds GPUs and is terminal", s)
		}
	}
}

func TestJobStateEnded(t *testing.T) {
	ended := map[JobState]bool{JobSucceeded: true, JobFailed: true, JobCancelled: true, JobPreempted: true}
	for _, s := range JobStates {
		if s.Ended() != ended[s] {
			t.Errorf("%s.Ended() = %t, want %t", s, s.Ended(), ended[s])
		}
	}
}

// TestRefAndDefaultJobName: Ref and DefaultJobName join strings instead of
// formatting them (issue 18: fewer bytes per submit); they must make the
// strings the log and every snapshot already hold, which fmt made.
func TestRefAndDefaultJobName(t *testing.T) {
	for _, c := range [][2]string{{"acme", "research"}, {"", ""}, {"a%sb", "%d"}, {"ünï", "\xff/x"}, {"acme", ""}} {
		if got, want := Ref(c[0], c[1]), fmt.Sprintf("%s/%s", c[0], c[1]); got != want {
			t.Errorf("Ref(%q, %q) = %q, want %q", c[0], c[1], got, want)
		}
	}
	for _, id := range []uint64{0, 1, 42, 100_000, math.MaxUint64} {
		if got, want := DefaultJobName(id), fmt.Sprintf("job-%d", id); got != want {
			t.Errorf("DefaultJobName(%d) = %q, want %q", id, got, want)
		}
	}
}
