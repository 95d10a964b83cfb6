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
	var kubeconfig, inventoryToken, runtimeToken, cluster, deviceClass, level, format string
	var tenants []string
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

Gangs also come from a pod's batch Job, JobSet or LeaderWorkerSet; GPUs from
nvidia.com/gpu, DRA ResourceClaims (device class --gpu-device-class), or the
jobfabric.io/mig-profile and jobfabric.io/gpu-share annotations.

--token is the jobs' token: a tenant-scoped one (tenant-admin or member)
confines the bridge to that tenant, whatever a namespace says. With an admin
token, --tenant lists the tenants namespaces may name (else any: whoever
labels namespaces picks who pays). --runtime-token (a runtime's; default:
--token when it is an admin's) reports the pods' phases as the jobs'
progress and their eviction as stopped. With an admin --inventory-token
(default: --token when it is an admin's) every server is kept as a Node with
the topology labels, cordon as spec.unschedulable and a taint, unhealthy and
drift as Node conditions.

  jobfabric kube run --kubeconfig ~/.kube/config --server https://jf:7070 --token "$TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond || interval > time.Hour {
				return domain.Invalid("interval", "--interval %s must be between 100ms and 1h", interval)
			}
			for _, t := range tenants {
				if err := domain.ValidateName("tenant", t); err != nil {
					return domain.Invalid("tenant", "--tenant %q: %s", t, err.Message)
				}
			}
			if cluster != "" {
				if err := domain.ValidateName("cluster", cluster); err != nil {
					return domain.Invalid("cluster", "--cluster %q: %s", cluster, err.Message)
				}
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
			cfg := kube.Config{Kube: kc, Jobs: jobs, Interval: interval, Logger: log, Tenants: tenants, Cluster: cluster, GPUDeviceClass: deviceClass}
			if who.Role == domain.RoleAdmin && len(tenants) == 0 {
				log.Warn("kube bridge: an admin token and no --tenant list: any namespace's labels choose the tenant that pays; only cluster admins must be able to label namespaces (docs/kubernetes.md)")
			}
			other := func(token string) (*client.Client, error) {
				server, _, ca, err := g.endpoint()
				if err != nil {
					return nil, err
				}
				var tc *tls.Config
				if strings.HasPrefix(server, "https://") {
					if tc, err = tlsutil.ClientConfig(ca, ""); err != nil {
						return nil, fmt.Errorf("load the CA certificate: %w", err)
					}
				}
				c, err := client.New(server, token, tc)
				if err != nil {
					return nil, usageErr(err)
				}
				return c, nil
			}
			switch {
			case runtimeToken != "":
				if cfg.Runtime, err = other(runtimeToken); err != nil {
					return err
				}
			case who.Role == domain.RoleAdmin:
				cfg.Runtime = jobs
			default:
				log.Info("kube bridge: no runtime token, pod phases are not reported to jobfabric", "role", who.Role, "tenant", who.Tenant)
			}
			var inv *client.Client
			switch {
			case inventoryToken != "":
				if inv, err = other(inventoryToken); err != nil {
					return err
				}
				cfg.Inventory = inv
			case who.Role == domain.RoleAdmin:
				inv, cfg.Inventory = jobs, jobs
			default:
				log.Info("kube bridge: no admin token, Nodes are not synced from the inventory", "role", who.Role, "tenant", who.Tenant)
			}
			// The pools of node constraints (nodeSelector, required node
			// affinity, taints): an admin's or a platform runtime's.
			switch {
			case inv != nil:
				cfg.Pools = inv
			case who.Role == domain.RoleRuntime && who.Tenant == "" && who.Node == "":
				cfg.Pools = jobs
			default:
				log.Info("kube bridge: no admin or platform runtime token, so no server pools: a gang whose node constraint (nodeSelector, required node affinity, taints) leaves out some Node is refused", "role", who.Role, "tenant", who.Tenant)
			}
			return kube.New(cfg).Run(cmd.Context())
		},
	}
	f := run.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&inventoryToken, "inventory-token", "", "admin token for the Node sync (default: --token if it is an admin's; else no sync)")
	f.StringVar(&runtimeToken, "runtime-token", "", "runtime token the pods' phases are reported with (default: --token if it is an admin's; else none)")
	f.StringSliceVar(&tenants, "tenant", nil, "tenants namespaces may name (repeatable; default: any the token reaches)")
	f.StringVar(&cluster, "cluster", "", "this cluster's name in the jobs' ExternalIDs (k8s:CLUSTER:ID), for tenants served by several clusters")
	f.StringVar(&deviceClass, "gpu-device-class", kube.DefaultGPUDeviceClass, "DRA device class whose devices are GPUs")
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
			return paced(rc), nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		// Not a domain.Invalid: its field would be rewritten into the path.
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	return paced(rc), nil
}

// paced names the bridge and raises client-go's default rate (5/s, bursts
// of 10), which would pace a burst of pods at a few per second: each pod
// takes an annotation, a release and a bind.
func paced(rc *rest.Config) *rest.Config {
	rc.UserAgent = kube.Component
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 100, 200
	}
	return rc
}
