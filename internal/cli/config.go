package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fileutil"
)

// clientConfig is the CLI's config file: named contexts, one per cluster,
// as kubectl's kubeconfig has. A context names a server, the CA that
// verifies it and a file holding the token (never the token itself, so the
// config can be shown and shared).
type clientConfig struct {
	CurrentContext string          `yaml:"current-context,omitempty" json:"current-context,omitempty"`
	Contexts       []clientContext `yaml:"contexts" json:"contexts"`
}

type clientContext struct {
	Name      string `yaml:"name" json:"name"`
	Server    string `yaml:"server,omitempty" json:"server,omitempty"`
	CA        string `yaml:"ca,omitempty" json:"ca,omitempty"`
	TokenFile string `yaml:"token-file,omitempty" json:"token-file,omitempty"`
}

// contextChange is what set-context, use-context, current-context and
// delete-context print with -o json|yaml|name: the context, the file, and
// what became of it.
type contextChange struct {
	Context string `json:"context"`
	File    string `json:"file"`
	// Action: set, current, deleted.
	Action string `json:"action"`
}

func (c contextChange) names() []string { return []string{"context/" + c.Context} }

// configPath is $JOBFABRIC_CONFIG, else ~/.config/jobfabric/config.yaml.
func configPath() (string, error) {
	if p := os.Getenv("JOBFABRIC_CONFIG"); p != "" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the config file: %w (set JOBFABRIC_CONFIG)", err)
	}
	return filepath.Join(home, ".config", "jobfabric", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
// Unknown keys are refused by name, as the API refuses unknown fields.
func loadConfig(path string) (*clientConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	var c clientConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &c, nil
}

// save writes the config readable by its owner only: it points at token files.
func (c *clientConfig) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if err := fileutil.WriteAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}

func (c *clientConfig) find(name string) *clientContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

func (c *clientConfig) names() []string {
	out := make([]string, len(c.Contexts))
	for i, x := range c.Contexts {
		out[i] = x.Name
	}
	return out
}

// contextFor is the context a command uses: --context, else
// JOBFABRIC_CONTEXT, else the config's current context; nil when none is
// set. Naming a context that does not exist is an error.
func (g *globals) contextFor() (*clientContext, error) {
	name, flag := g.context, "--context"
	if name == "" {
		name, flag = os.Getenv("JOBFABRIC_CONTEXT"), "JOBFABRIC_CONTEXT"
	}
	path, err := configPath()
	if err != nil {
		if name == "" {
			return nil, nil // no home and no context asked for: flags and env only
		}
		return nil, err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name, flag = cfg.CurrentContext, "current-context of "+path
		if name == "" {
			return nil, nil
		}
	}
	ctx := cfg.find(name)
	if ctx == nil {
		return nil, usagef("%s: context %q is not in %s (known: %s)", flag, name, path, orNone(cfg.names()))
	}
	return ctx, nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Contexts: a server, CA and token file per cluster, in $JOBFABRIC_CONFIG or ~/.config/jobfabric/config.yaml",
		Long: `Contexts name clusters: each holds a server URL, the CA that verifies it and a
file with the token to send. The current context applies when --server,
--ca and --token (or JOBFABRIC_SERVER, JOBFABRIC_CA, JOBFABRIC_TOKEN) are not
given: flags win over the environment, the environment over the context.
--context NAME (or JOBFABRIC_CONTEXT) picks another context for one command.
The file is $JOBFABRIC_CONFIG, else ~/.config/jobfabric/config.yaml (mode 0600).`,
	}
	var server, ca, tokenFile string
	set := &cobra.Command{
		Use:   "set-context NAME",
		Short: "Create or change a context; the first one becomes current",
		Example: `  jobfabric config set-context prod --server https://jf.example.com:7070 --ca /etc/jobfabric/ca.pem --token-file ~/.jobfabric/prod.token
  jobfabric config set-context prod --server https://jf2.example.com:7070   # changes only the server`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := domain.ValidateName("context", name); err != nil {
				return usageErr(err)
			}
			path, cfg, err := openConfig()
			if err != nil {
				return err
			}
			ctx := cfg.find(name)
			if ctx == nil {
				cfg.Contexts = append(cfg.Contexts, clientContext{Name: name})
				ctx = &cfg.Contexts[len(cfg.Contexts)-1]
			}
			f := cmd.Flags()
			if f.Changed("server") {
				if err := checkServerURL(server); err != nil {
					return err
				}
				ctx.Server = server
			}
			if f.Changed("ca") {
				if ctx.CA, err = absFile("ca", ca); err != nil {
					return err
				}
			}
			if f.Changed("token-file") {
				if ctx.TokenFile, err = absFile("token-file", tokenFile); err != nil {
					return err
				}
			}
			if cfg.CurrentContext == "" {
				cfg.CurrentContext = name
			}
			if err := cfg.save(path); err != nil {
				return err
			}
			return g.emit(contextChange{Context: name, File: path, Action: "set"}, func(w io.Writer) {
				fmt.Fprintf(w, "context %s set in %s\n", name, path)
			})
		},
	}
	// Local flags shadow the global --server and --ca inside this command.
	set.Flags().StringVar(&server, "server", "", "API URL of the cluster, e.g. https://jf.example.com:7070")
	set.Flags().StringVar(&ca, "ca", "", "CA certificate that verifies the server (https)")
	set.Flags().StringVar(&tokenFile, "token-file", "", "file holding the bearer token (read at each command)")

	use := &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make a context the current one",
		Example:           "  jobfabric config use-context prod",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, cfg, err := openConfig()
			if err != nil {
				return err
			}
			if cfg.find(args[0]) == nil {
				return &exitError{code: exitNotFound, err: fmt.Errorf("context %q is not in %s (known: %s)", args[0], path, orNone(cfg.names()))}
			}
			cfg.CurrentContext = args[0]
			if err := cfg.save(path); err != nil {
				return err
			}
			return g.emit(contextChange{Context: args[0], File: path, Action: "current"}, func(w io.Writer) {
				fmt.Fprintf(w, "switched to context %s\n", args[0])
			})
		},
	}
	get := &cobra.Command{
		Use:     "get-contexts",
		Short:   "List the contexts; * marks the current one",
		Example: "  jobfabric config get-contexts\n  jobfabric config get-contexts -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			_, cfg, err := openConfig()
			if err != nil {
				return err
			}
			return g.emit(cfg.Contexts, func(w io.Writer) {
				header(w, "CURRENT", "NAME", "SERVER", "CA", "TOKEN-FILE")
				for _, c := range cfg.Contexts {
					cur := ""
					if c.Name == cfg.CurrentContext {
						cur = "*"
					}
					row(w, cur, c.Name, orDash(c.Server), orDash(c.CA), orDash(c.TokenFile))
				}
			})
		},
	}
	current := &cobra.Command{
		Use:     "current-context",
		Short:   "Print the current context's name",
		Example: "  jobfabric config current-context",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, cfg, err := openConfig()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return &exitError{code: exitNotFound, err: fmt.Errorf("no current context in %s: jobfabric config use-context NAME", path)}
			}
			return g.emit(contextChange{Context: cfg.CurrentContext, File: path, Action: "current"}, func(w io.Writer) {
				fmt.Fprintln(w, cfg.CurrentContext)
			})
		},
	}
	view := &cobra.Command{
		Use:     "view",
		Short:   "Print the config file (it holds token file names, never tokens)",
		Example: "  jobfabric config view\n  jobfabric config view -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			_, cfg, err := openConfig()
			if err != nil {
				return err
			}
			if g.output != "table" && g.output != "wide" {
				return g.emit(cfg, nil) // json, yaml, jsonpath; name refuses
			}
			// The table form is the file itself, as written.
			b, err := yaml.Marshal(cfg)
			if err != nil {
				return fmt.Errorf("encode config: %w", err)
			}
			_, err = g.stdout.Write(b)
			return err
		},
	}
	del := &cobra.Command{
		Use:               "delete-context NAME",
		Short:             "Remove a context (the token file stays); removing the current one leaves none current",
		Example:           "  jobfabric config delete-context old-lab",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, cfg, err := openConfig()
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cfg.Contexts, func(c clientContext) bool { return c.Name == args[0] })
			if i < 0 {
				return &exitError{code: exitNotFound, err: fmt.Errorf("context %q is not in %s (known: %s)", args[0], path, orNone(cfg.names()))}
			}
			cfg.Contexts = slices.Delete(cfg.Contexts, i, i+1)
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			if err := cfg.save(path); err != nil {
				return err
			}
			return g.emit(contextChange{Context: args[0], File: path, Action: "deleted"}, func(w io.Writer) {
				fmt.Fprintf(w, "context %s deleted from %s\n", args[0], path)
			})
		},
	}
	cmd.AddCommand(set, use, get, current, view, del)
	return cmd
}

func openConfig() (string, *clientConfig, error) {
	path, err := configPath()
	if err != nil {
		return "", nil, err
	}
	cfg, err := loadConfig(path)
	return path, cfg, err
}

// absFile makes a context's file path absolute (the config is read from
// any directory) and checks that the file can be read now.
func absFile(flag, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", usagef("--%s %s: %v", flag, p, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", usagef("--%s %s: %v", flag, p, err)
	}
	return abs, nil
}

func completeContexts(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	_, cfg, err := openConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return cfg.names(), cobra.ShellCompDirectiveNoFileComp
}
