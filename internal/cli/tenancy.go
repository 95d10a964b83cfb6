package cli

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func newTenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Create, list and delete tenants"}
	var req api.TenantCreateRequest
	var iso, net string
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a tenant (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req.Name, req.Isolation, req.Network = args[0], domain.Isolation(iso), domain.NetworkModel(net)
			t, err := c.CreateTenant(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(t, func(w io.Writer) { g.tenantTable(w, []domain.Tenant{*t}) })
		},
	}
	var q domain.TenantQuota
	var sites []string
	create.Flags().IntVar(&q.Guaranteed, "guaranteed", 0, "GPUs reserved for the tenant as a whole (with a tenant quota)")
	create.Flags().IntVar(&q.BorrowLimit, "borrow-limit", 0, "GPUs the tenant may borrow from other tenants")
	create.Flags().IntVar(&q.LendLimit, "lend-limit", 0, "GPUs of its idle guarantee other tenants may borrow")
	create.Flags().StringSliceVar(&sites, "sites", nil, "sites its jobs may run in (data residency; default anywhere)")
	create.PreRun = func(cmd *cobra.Command, args []string) {
		fl := cmd.Flags()
		if fl.Changed("guaranteed") || fl.Changed("borrow-limit") || fl.Changed("lend-limit") {
			req.Quota = &q
		}
		req.Sites = sites
	}
	create.Flags().StringVar(&iso, "isolation", "server", "isolation mode: server (a server hosts one tenant at a time) or gpu")
	create.Flags().StringVar(&net, "network", "pure-rt5", "network model: pure-rt5 or vlan-aware")
	create.Flags().BoolVar(&req.JobSegmentation, "job-segmentation", false, "give each job its own group-policy segment")
	list := &cobra.Command{
		Use: "list", Short: "List tenants", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ts, err := c.Tenants(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(ts, func(w io.Writer) { g.tenantTable(w, ts) })
		},
	}
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a tenant", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return tenantDo(cmd, g, "GET", args[0], func(w io.Writer, t domain.Tenant) { g.tenantTable(w, []domain.Tenant{t}) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a tenant that has no workspaces (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return tenantDo(cmd, g, "DELETE", args[0], func(w io.Writer, t domain.Tenant) { fmt.Fprintf(w, "tenant %s deleted\n", t.Name) })
		},
	}
	var uq domain.TenantQuota
	var usites []string
	var noQuota bool
	update := &cobra.Command{
		Use: "update NAME", Short: "Change a tenant's quota or sites (admin); only the flags given change", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			var body api.TenantUpdateRequest
			if fl.Changed("guaranteed") || fl.Changed("borrow-limit") || fl.Changed("lend-limit") {
				var cur domain.Tenant
				if err := c.Do(cmd.Context(), "GET", "/v1/tenants/"+url.PathEscape(args[0]), nil, &cur); err != nil {
					return err
				}
				q := domain.TenantQuota{}
				if cur.Quota != nil {
					q = *cur.Quota
				}
				if fl.Changed("guaranteed") {
					q.Guaranteed = uq.Guaranteed
				}
				if fl.Changed("borrow-limit") {
					q.BorrowLimit = uq.BorrowLimit
				}
				if fl.Changed("lend-limit") {
					q.LendLimit = uq.LendLimit
				}
				body.Quota = &q
			}
			body.RemoveQuota = noQuota
			if fl.Changed("sites") {
				body.Sites = &usites
			}
			var t domain.Tenant
			if err := c.Do(cmd.Context(), "PATCH", "/v1/tenants/"+url.PathEscape(args[0]), body, &t); err != nil {
				return err
			}
			return g.emit(t, func(w io.Writer) { g.tenantTable(w, []domain.Tenant{t}) })
		},
	}
	uf := update.Flags()
	uf.IntVar(&uq.Guaranteed, "guaranteed", 0, "GPUs reserved for the tenant as a whole")
	uf.IntVar(&uq.BorrowLimit, "borrow-limit", 0, "GPUs the tenant may borrow from other tenants")
	uf.IntVar(&uq.LendLimit, "lend-limit", 0, "GPUs of its idle guarantee other tenants may borrow")
	uf.BoolVar(&noQuota, "no-quota", false, "remove the tenant quota (its workspaces' limits alone apply)")
	uf.StringSliceVar(&usites, "sites", nil, "sites its jobs may run in (empty: anywhere)")
	cmd.AddCommand(create, update, list, show, del)
	return cmd
}

func tenantDo(cmd *cobra.Command, g *globals, method, name string, table func(io.Writer, domain.Tenant)) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	var t domain.Tenant
	if err := c.Do(cmd.Context(), method, "/v1/tenants/"+url.PathEscape(name), nil, &t); err != nil {
		return err
	}
	return g.emit(t, func(w io.Writer) { table(w, t) })
}

func (p *printing) tenantTable(w io.Writer, ts []domain.Tenant) {
	header(w, "NAME", "ISOLATION", "NETWORK", "JOB-SEGMENTATION", "QUOTA", "SITES", "AGE")
	for _, t := range ts {
		quota := "-"
		if q := t.Quota; q != nil {
			quota = fmt.Sprintf("%d+%d (lends %d)", q.Guaranteed, q.BorrowLimit, q.LendLimit)
		}
		row(w, t.Name, t.Isolation, t.Network, t.JobSegmentation, quota, orDash(strings.Join(t.Sites, ",")), p.age(t.CreatedAt))
	}
}

// setRef parses a --workspace TENANT/WORKSPACE flag into tenant and ws;
// an empty flag leaves both as they are.
func setRef(ref string, tenant, ws *string) error {
	if ref == "" {
		return nil
	}
	t, w, err := splitRef("workspace", ref)
	if err != nil {
		return err
	}
	*tenant, *ws = t, w
	return nil
}

// splitRef parses "tenant/workspace".
func splitRef(field, ref string) (tenant, ws string, err error) {
	t, w, ok := strings.Cut(ref, "/")
	if !ok || t == "" || w == "" || strings.Contains(w, "/") {
		return "", "", domain.Invalid(field, "%s %q must be TENANT/WORKSPACE, e.g. acme/research", field, ref)
	}
	return t, w, nil
}

func newWorkspaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Short: "Create, list, change and delete workspaces (quota holders inside a tenant)"}
	var req api.WorkspaceCreateRequest
	var weight int
	var modelQuotas []string
	create := &cobra.Command{
		Use: "create TENANT/NAME", Short: "Create a workspace (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, w, err := splitRef("workspace", args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			req.Name, req.Weight = w, &weight
			if req.Models, err = parseModelQuotas(modelQuotas); err != nil {
				return err
			}
			ws, err := c.CreateWorkspace(cmd.Context(), t, req)
			if err != nil {
				return err
			}
			return g.emit(ws, func(out io.Writer) { workspaceTable(out, []domain.Workspace{*ws}) })
		},
	}
	f := create.Flags()
	f.IntVar(&req.Guaranteed, "guaranteed", 0, "GPUs reserved for the workspace")
	f.IntVar(&req.BorrowLimit, "borrow-limit", 0, "GPUs it may use above guaranteed when others are idle")
	f.IntVar(&req.LendLimit, "lend-limit", 0, "GPUs of its idle guarantee others may borrow (<= guaranteed)")
	f.IntVar(&weight, "weight", 1, "share of borrowed capacity relative to other borrowers")
	f.IntVar(&req.Priority, "priority", 0, "priority of the workspace's jobs against other workspaces")
	f.StringArrayVar(&modelQuotas, "model-quota", nil, modelQuotaHelp)
	f.StringVar(&req.Preemption, "preemption", "", preemptionHelp)

	var upd api.WorkspaceUpdateRequest
	var updModels []string
	var noModels bool
	update := &cobra.Command{
		Use: "update TENANT/NAME", Short: "Change a workspace's quota (admin); only the flags given change", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, w, err := splitRef("workspace", args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			for name, dst := range map[string]**int{"guaranteed": &upd.Guaranteed, "borrow-limit": &upd.BorrowLimit, "lend-limit": &upd.LendLimit, "weight": &upd.Weight, "priority": &upd.Priority} {
				if fl.Changed(name) {
					v, _ := fl.GetInt(name)
					*dst = &v
				}
			}
			if fl.Changed("preemption") {
				v, _ := fl.GetString("preemption")
				upd.Preemption = &v
			}
			if noModels && len(updModels) > 0 {
				return domain.Invalid("model-quota", "--model-quota and --no-model-quotas exclude each other")
			}
			if len(updModels) > 0 || noModels {
				ms, err := parseModelQuotas(updModels)
				if err != nil {
					return err
				}
				if ms == nil {
					ms = []domain.ModelQuota{}
				}
				upd.Models = &ms
			}
			var ws domain.Workspace
			if err := c.Do(cmd.Context(), "PATCH", "/v1/tenants/"+t+"/workspaces/"+w, upd, &ws); err != nil {
				return err
			}
			return g.emit(ws, func(out io.Writer) { workspaceTable(out, []domain.Workspace{ws}) })
		},
	}
	uf := update.Flags()
	uf.Int("guaranteed", 0, "GPUs reserved for the workspace")
	uf.Int("borrow-limit", 0, "GPUs it may use above guaranteed")
	uf.Int("lend-limit", 0, "GPUs of its idle guarantee others may borrow")
	uf.Int("weight", 1, "share of borrowed capacity")
	uf.Int("priority", 0, "priority")
	uf.StringArrayVar(&updModels, "model-quota", nil, modelQuotaHelp+"; replaces all model quotas")
	uf.BoolVar(&noModels, "no-model-quotas", false, "remove all model quotas")
	uf.String("preemption", "", preemptionHelp)

	list := &cobra.Command{
		Use: "list TENANT", Short: "List a tenant's workspaces", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ws, err := c.Workspaces(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(ws, func(out io.Writer) { workspaceTable(out, ws) })
		},
	}
	show := &cobra.Command{
		Use: "show TENANT/NAME", Short: "Show a workspace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return workspaceDo(cmd, g, "GET", args[0])
		},
	}
	del := &cobra.Command{
		Use: "delete TENANT/NAME", Short: "Delete a workspace without active jobs (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return workspaceDo(cmd, g, "DELETE", args[0])
		},
	}
	cmd.AddCommand(create, update, list, show, del)
	return cmd
}

func workspaceDo(cmd *cobra.Command, g *globals, method, ref string) error {
	t, w, err := splitRef("workspace", ref)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	var ws domain.Workspace
	if err := c.Do(cmd.Context(), method, "/v1/tenants/"+t+"/workspaces/"+w, nil, &ws); err != nil {
		return err
	}
	return g.emit(ws, func(out io.Writer) { workspaceTable(out, []domain.Workspace{ws}) })
}

func workspaceTable(w io.Writer, ws []domain.Workspace) {
	header(w, "WORKSPACE", "GUARANTEED", "BORROW-LIMIT", "LEND-LIMIT", "WEIGHT", "PRIORITY", "MODEL-QUOTAS")
	for _, x := range ws {
		var ms []string
		for _, m := range x.Models {
			ms = append(ms, fmt.Sprintf("%s=%d:%d:%d", m.Model, m.Guaranteed, m.BorrowLimit, m.LendLimit))
		}
		row(w, x.Ref(), x.Guaranteed, x.BorrowLimit, x.LendLimit, x.Weight, x.Priority, orDash(strings.Join(ms, ",")))
	}
}

const preemptionHelp = "what a runtime bridge (jobfabric slurm bridge) does with a preempted job at its grace deadline: requeue (default) or cancel"

const modelQuotaHelp = "quota on one GPU model as MODEL=GUARANTEED[:BORROW[:LEND]], e.g. H100-80GB=8:8:4 (repeatable; guarantees carve --guaranteed)"

// parseModelQuotas reads --model-quota values.
func parseModelQuotas(vals []string) ([]domain.ModelQuota, error) {
	var out []domain.ModelQuota
	for _, v := range vals {
		model, nums, ok := strings.Cut(v, "=")
		parts := strings.Split(nums, ":")
		if !ok || model == "" || len(parts) > 3 {
			return nil, domain.Invalid("model-quota", "--model-quota %q is not MODEL=GUARANTEED[:BORROW[:LEND]]", v)
		}
		q := domain.ModelQuota{Model: model}
		for i, dst := range []*int{&q.Guaranteed, &q.BorrowLimit, &q.LendLimit}[:len(parts)] {
			n, err := strconv.Atoi(parts[i])
			if err != nil {
				return nil, domain.Invalid("model-quota", "--model-quota %q: %q is not a whole number of GPUs", v, parts[i])
			}
			*dst = n
		}
		out = append(out, q)
	}
	return out, nil
}

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke bearer tokens"}
	var req api.TokenCreateRequest
	var role, ws string
	var ttl time.Duration
	create := &cobra.Command{
		Use: "create", Short: "Create a token; its secret is printed once", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req.Role = domain.Role(role)
			if ws != "" {
				if strings.Contains(ws, "/") {
					t, w, err := splitRef("workspace", ws)
					if err != nil {
						return err
					}
					if req.Tenant != "" && req.Tenant != t {
						return domain.Invalid("workspace", "workspace %q is not in tenant %q", ws, req.Tenant)
					}
					req.Tenant, req.Workspace = t, w
				} else {
					req.Workspace = ws
				}
			}
			if req.TTLSeconds, err = durationSeconds("ttl", ttl); err != nil {
				return err
			}
			if cmd.Flags().Changed("ttl") && req.TTLSeconds == 0 {
				return domain.Invalid("ttl", "--ttl 0s: give a positive duration, or leave --ttl out for a token that never expires")
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(t, func(w io.Writer) {
				fmt.Fprintln(w, t.Secret)
				exp := ""
				if t.Token.ExpiresAt != nil {
					exp = ", expires " + g.when(*t.Token.ExpiresAt)
				}
				fmt.Fprintf(g.stderr, "token %s (%s%s%s) created; the secret above is shown only once\n", t.Token.ID, t.Token.Role, scope(t.Token), exp)
			})
		},
	}
	f := create.Flags()
	f.StringVar(&role, "role", "", "admin, tenant-admin, member or runtime (a workload runtime or node agent: reads jobs, reports their progress)")
	f.StringVar(&req.Tenant, "tenant", "", "tenant of a tenant-admin, member or runtime token (a runtime token without one serves the whole platform)")
	f.StringVar(&ws, "workspace", "", "workspace of a member token (NAME with --tenant, or TENANT/NAME)")
	f.StringVar(&req.Description, "description", "", "what the token is for")
	f.StringVar(&req.Node, "node", "", "scope a runtime token without tenant to one node's agent (jobfabric agent --node)")
	f.DurationVar(&ttl, "ttl", 0, "make the token expire this long after now, e.g. 24h (whole seconds, at most a year; default: never)")
	list := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ts []domain.Token
			if err := c.Do(cmd.Context(), "GET", "/v1/tokens", nil, &ts); err != nil {
				return err
			}
			return g.emit(ts, func(w io.Writer) {
				header(w, "ID", "ROLE", "SCOPE", "DESCRIPTION", "CREATED", "EXPIRES", "LAST-USED")
				for _, t := range ts {
					row(w, t.ID, t.Role, orDash(t.Scope()), orDash(t.Description), g.when(t.CreatedAt), g.expires(t), g.whenPtr(t.LastUsedAt))
				}
			})
		},
	}
	revoke := &cobra.Command{
		Use: "revoke ID", Aliases: []string{"delete"}, Short: "Revoke a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var t domain.Token
			if err := c.Do(cmd.Context(), "DELETE", "/v1/tokens/"+args[0], nil, &t); err != nil {
				return err
			}
			return g.emit(t, func(w io.Writer) { fmt.Fprintf(w, "token %s revoked\n", t.ID) })
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// scope is " " and the token's scope, or "" for an admin token.
func scope(t domain.Token) string {
	if s := t.Scope(); s != "" {
		return " " + s
	}
	return ""
}

// expires renders a token's expiry: "-" for never, the time, and
// "(expired)" once past.
func (p *printing) expires(t domain.Token) string {
	if t.ExpiresAt == nil {
		return "-"
	}
	s := p.when(*t.ExpiresAt)
	if t.Expired(p.clock()) {
		s += " (expired)"
	}
	return s
}

func newWhoamiCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "whoami", Short: "Show the token in use", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(t, func(w io.Writer) {
				fmt.Fprintf(w, "token %s: %s%s", t.ID, t.Role, scope(*t))
				if t.ExpiresAt != nil {
					fmt.Fprintf(w, ", expires %s", g.expires(*t))
				}
				fmt.Fprintln(w)
			})
		},
	}
}
