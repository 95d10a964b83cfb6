package server

import "context"

// Settle kicks a scheduling cycle and returns once a cycle begun after the
// call has ended: the scheduler's answer to every change made before it is
// committed (a test's wait for the leader's loop, instead of a sleep).
func (s *Server) Settle(ctx context.Context) error {
	n := s.cycles.next()
	s.kickScheduler()
	return s.cycles.wait(ctx, n)
}

// DeployNow runs one deploy round of the fabric loop with ctx, retrying
// failed devices (the loop's, under its lock).
func (s *Server) DeployNow(ctx context.Context) error {
	s.fabricMu.Lock()
	defer s.fabricMu.Unlock()
	return s.deployFabric(ctx, true)
}
