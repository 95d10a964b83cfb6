package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
)

// newClusterTLSCmd is `cluster tls`: the certificates and cluster secret
// the member answering uses, to check each step of a rotation on every
// member (docs/operations.md).
func newClusterTLSCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "tls",
		Short:   "The certificates and cluster secret the member answering uses now, and its last refused reload (admin); ask each member",
		Example: "  jobfabric --server https://10.0.0.2:7070 cluster tls\n  jobfabric cluster tls -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var st api.TLSStatus
			if err := c.Do(cmd.Context(), "GET", "/v1/cluster/tls", nil, &st); err != nil {
				return err
			}
			return g.emit(st, func(w io.Writer) { printTLSStatus(w, st) })
		},
	}
}

func printTLSStatus(w io.Writer, st api.TLSStatus) {
	fmt.Fprintf(w, "member %s, raft peers: %s\n", st.Node, st.PeerAuth)
	if a := st.API; a != nil {
		fmt.Fprintf(w, "api certificate: serial %s, not after %s, %d CA certificates, %d reloads\n", a.Serial, a.NotAfter.UTC().Format(time.RFC3339), a.CAs, a.Reloads)
		if a.LastError != "" {
			fmt.Fprintf(w, "  last refused reload (%s): %s\n", a.LastErrorAt.UTC().Format(time.RFC3339), a.LastError)
		}
	}
	if st.RaftSerial != "" {
		fmt.Fprintf(w, "raft certificate: serial %s, not after %s\n", st.RaftSerial, st.RaftNotAfter.UTC().Format(time.RFC3339))
	}
	if s := st.Secret; s != nil {
		acc := "none"
		if len(s.Accepted) > 0 {
			acc = strings.Join(s.Accepted, ", ")
		}
		fmt.Fprintf(w, "cluster secret: issuing %s, also accepting %s, %d reloads\n", s.Issuing, acc, s.Reloads)
		if s.LastError != "" {
			fmt.Fprintf(w, "  last refused reload (%s): %s\n", s.LastErrorAt.UTC().Format(time.RFC3339), s.LastError)
		}
	}
}
