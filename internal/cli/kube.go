package cli

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
)

// newKubeCmd is `jobfabric kube`: the Kubernetes bridge.
func newKubeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kube", Short: "Kubernetes: place gated pods through jobfabric (docs/kubernetes.md)"}
	var kubeconfig, inventoryToken, level, format string
	var interval time.Duration
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the bridge: Nodes from the inventory, gated pods submitted as jobs and released when Ready",
		Long: `Run the Kubernetes bridge until interrupted. Pods with the scheduling gate
jobfabric.io/placement, in namespaces labelled jobfabric.io/tenant and
jobfabric.io/workspace, are submitted as one job per pod group (label
jobfabric.io/pod-group, size jobfabric.io/pod-group-size); when the job is
Ready each pod gets node affinity to its server, its binding as annotations,
the gate removed and is bound to the node.

--token is the jobs' token: a tenant-scoped one (tenant-admin or member)
confines the bridge to that tenant, whatever a namespace says. With an admin
--inventory-token (default: --token when it is an admin's) every server is
kept as a Node with the topology labels, cordon as spec.unschedulable.

  jobfabric kube run --kubeconfig ~/.kube/config --server https://jf:7070 --token "$TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond || interval > time.Hour {
				return domain.Invalid("interval", "--interval %s must be between 100ms and 1h", interval)
			}
			log, err := logger(g.stderr, level, format)
			if err != nil {
				return err
			}
			rc, err := kubeConfig(kubeconfig)
			if err != nil {
				return err
			}
			kc, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			jobs, err := g.client()
			if err != nil {
				return err
			}
			who, err := jobs.WhoAmI(cmd.Context())
			if err != nil {
				return fmt.Errorf("jobfabric token: %w", err)
			}
			cfg := kube.Config{Kube: kc, Jobs: jobs, Interval: interval, Logger: log}
			switch {
			case inventoryToken != "":
				server, _, ca, err := g.endpoint()
				if err != nil {
					return err
				}
				var tc *tls.Config
				if strings.HasPrefix(server, "https://") {
					if tc, err = tlsutil.ClientConfig(ca, ""); err != nil {
						return fmt.Errorf("load the CA certificate: %w", err)
					}
				}
				inv, err := client.New(server, inventoryToken, tc)
				if err != nil {
					return usageErr(err)
				}
				cfg.Inventory = inv
			case who.Role == domain.RoleAdmin:
				cfg.Inventory = jobs
			default:
				log.Info("kube bridge: no admin token, Nodes are not synced from the inventory", "role", who.Role, "tenant", who.Tenant)
			}
			return kube.New(cfg).Run(cmd.Context())
		},
	}
	f := run.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&inventoryToken, "inventory-token", "", "admin token for the Node sync (default: --token if it is an admin's; else no sync)")
	f.DurationVar(&interval, "interval", 2*time.Second, "how often job states are looked at again besides pod events")
	f.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&format, "log-format", "text", "text or json")
	cmd.AddCommand(run)
	return cmd
}

// kubeConfig loads --kubeconfig, else the in-cluster config, else the
// kubeconfig rules of kubectl ($KUBECONFIG, ~/.kube/config).
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		// Not a domain.Invalid: its field would be rewritten into the path.
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	rc.UserAgent = kube.Component
	return rc, nil
}
