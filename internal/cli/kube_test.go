package cli

import "testing"

// TestKubeRunBadInput: the bridge refuses bad flags before it connects to
// anything (its work is tested against a real API server in internal/kube).
func TestKubeRunBadInput(t *testing.T) {
	runErrCases(t, map[string]errCase{
		"interval": {args: []string{"kube", "run", "--interval", "1ms"}, want: "--interval 1ms must be between 100ms and 1h"},
		"kubeconfig": {args: []string{"kube", "run", "--kubeconfig", "/nonexistent/kubeconfig"},
			want: `kubeconfig "/nonexistent/kubeconfig"`},
		"tenant":  {args: []string{"kube", "run", "--tenant", "Acme!"}, want: `--tenant "Acme!"`},
		"cluster": {args: []string{"kube", "run", "--cluster", "a:b"}, want: `--cluster "a:b"`},
	})
}
