package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/version"
)

// versions is what `version` prints: this binary and, unless --client,
// the server it talks to.
type versions struct {
	Client       version.Info `json:"client"`
	APIRevision  int          `json:"apiRevision"`
	Server       *api.Health  `json:"server,omitempty"`
	ServerURL    string       `json:"serverURL,omitempty"`
	ServerError  string       `json:"serverError,omitempty"`
	SkewWarnings []string     `json:"skewWarnings,omitempty"`
}

func newVersionCmd(g *globals) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The client's version and the server's, with a warning when they differ",
		Long: `Print this binary's version (a release's, else the module version and VCS
revision the Go toolchain recorded) and the server's, read from /v1/health,
with the API revision of each. A client and server of different versions
work together, but a client newer than the server may ask for what the
server does not know: version warns on stderr when they differ. When the
server cannot be reached, the client's version is printed and the command
exits 5 (a server error).`,
		Example: "  jobfabric version\n  jobfabric version --client\n  jobfabric version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			v := versions{Client: version.Get(), APIRevision: api.Revision}
			if !clientOnly {
				c, err := g.client()
				if err != nil {
					return err
				}
				v.ServerURL, _, _, _ = g.endpoint()
				h, err := c.Health(cmd.Context())
				if err != nil {
					v.ServerError = describe(cmd, err, true)
				} else {
					v.Server = h
					v.SkewWarnings = skew(v.Client.Version, h)
				}
			}
			for _, w := range v.SkewWarnings {
				fmt.Fprintln(g.stderr, "warning:", w)
			}
			if err := g.emit(v, func(w io.Writer) {
				row(w, "Client:", v.Client.String())
				row(w, "Client API revision:", v.APIRevision)
				switch {
				case v.Server != nil:
					row(w, "Server:", orDash(v.Server.Version)+" ("+v.ServerURL+", "+v.Server.Node+")")
					row(w, "Server API revision:", v.Server.APIRevision)
				case v.ServerError != "":
					row(w, "Server:", "unknown: "+v.ServerError)
				}
			}); err != nil {
				return err
			}
			if v.ServerError != "" {
				return &exitError{code: exitServer, err: fmt.Errorf("server %s: version unknown", v.ServerURL)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only this binary's version; do not ask the server")
	return cmd
}

// skew says how the server differs from this client; nothing when alike.
func skew(client string, h *api.Health) []string {
	var out []string
	switch {
	case h.Version == "":
		out = append(out, "the server does not report its version: it predates this client")
	case h.Version != client:
		out = append(out, fmt.Sprintf("client version %s differs from server version %s", client, h.Version))
	}
	switch {
	case h.APIRevision < api.Revision:
		out = append(out, fmt.Sprintf("the server's API revision %d is older than this client's %d: newer flags and fields may be refused or ignored; upgrade the server", h.APIRevision, api.Revision))
	case h.APIRevision > api.Revision:
		out = append(out, fmt.Sprintf("the server's API revision %d is newer than this client's %d: upgrade this client for the newest fields", h.APIRevision, api.Revision))
	}
	return out
}
