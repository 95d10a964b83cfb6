package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func newPoolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "Server pools: where a runtime can run a job (a Slurm partition); a job naming a pool runs on its servers only"}
	list := &cobra.Command{
		Use: "list", Short: "Server pools (a tenant's token: only those its own jobs name)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.Pools(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(ps, func(w io.Writer) {
				header(w, wideCols(w, []any{"POOL", "SERVERS", "NOT-IN-INVENTORY", "CHANGED"}, "BY", "MEMBERS")...)
				for _, p := range ps {
					row(w, wideCols(w, []any{p.Name, len(p.Servers), len(p.Unknown), g.age(p.UpdatedAt) + " ago"},
						orDash(p.UpdatedBy), strings.Join(p.Servers, ","))...)
				}
			})
		},
	}
	var file string
	set := &cobra.Command{
		Use: "set POOL [SERVER...]", Short: "Make the pool these servers (admin or platform runtime); jobs naming it are placed on them from the next cycle", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			servers := args[1:]
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read --servers-file: %w", err)
				}
				servers = append(servers, strings.Fields(string(b))...)
			}
			if len(servers) == 0 {
				return domain.Invalid("servers", "name the pool's servers (arguments or --servers-file); jobfabric pool delete %s deletes it", args[0])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.SetPool(cmd.Context(), args[0], servers)
			if err != nil {
				return err
			}
			return g.emit(*p, func(w io.Writer) { poolLine(w, *p) })
		},
	}
	set.Flags().StringVar(&file, "servers-file", "", "read the servers from this file (names separated by white space), besides the arguments")
	del := &cobra.Command{
		Use: "delete POOL", Short: "Delete the pool (admin or platform runtime): pending jobs naming it wait until it exists again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.DeletePool(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(*p, func(w io.Writer) { fmt.Fprintf(w, "pool %s deleted (it had %d servers)\n", p.Name, len(p.Servers)) })
		},
	}
	cmd.AddCommand(list, set, del)
	return cmd
}

func poolLine(w io.Writer, p api.Pool) {
	fmt.Fprintf(w, "pool %s: %d servers", p.Name, len(p.Servers))
	if len(p.Unknown) > 0 {
		fmt.Fprintf(w, " (%d not in the inventory: %s)", len(p.Unknown), strings.Join(p.Unknown, ","))
	}
	fmt.Fprintln(w)
}
