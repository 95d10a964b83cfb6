package server

import (
	"context"
	"errors"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// InjectFabricFault makes the fabric loop of the server cfg configures
// break every intent it compiles with fault before the verifier sees it,
// as a compiler bug would (a test seam: fault reads the test's switch, so
// the fault can go away).
func InjectFabricFault(cfg *Config, fault func(fabric.Input, *fabric.Intent)) {
	cfg.fabricFault = fault
}

// Settle kicks a scheduling cycle and returns once a cycle begun after the
// call has ended: the scheduler's answer to every change made before it is
// committed (a test's wait for the leader's loop, instead of a sleep).
func (s *Server) Settle(ctx context.Context) error {
	n := s.cycles.next()
	s.kickScheduler()
	return s.cycles.wait(ctx, n)
}

// DeployNow runs one deploy round of the fabric loop with ctx, retrying
// failed devices, and waits for it (as `fabric deploy` does, without the
// compile).
func (s *Server) DeployNow(ctx context.Context) error {
	return s.deployWait(ctx, false, true)
}

// DeploysSettled returns once no device's deploy is in flight: every
// deploy started before the call has ended, its outcome is committed and
// its revision timed.
func (s *Server) DeploysSettled(ctx context.Context) error {
	for {
		s.deploys.mu.Lock()
		var dones []chan struct{}
		for _, f := range s.deploys.inFlight {
			dones = append(dones, f.done)
		}
		s.deploys.mu.Unlock()
		if len(dones) == 0 {
			return nil
		}
		for _, d := range dones {
			select {
			case <-d:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// CompileNow compiles the state and commits a revision if it changed, as
// the fabric loop does on a change (deploying without retrying failed
// devices), so a test knows every change before the call is in the latest
// revision.
func (s *Server) CompileNow(ctx context.Context) error {
	for {
		_, _, err := s.fabricOnce(ctx, true, false)
		if !errors.Is(err, errStale) {
			return err
		}
	}
}
