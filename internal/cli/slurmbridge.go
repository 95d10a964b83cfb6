package cli

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

func newSlurmBridgeCmd(g *globals) *cobra.Command {
	var cluster, accountMap, slurmConf string
	var interval, stuckAfter time.Duration
	var once, unenforced bool
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Submit held Slurm jobs to jobfabric and release them on the servers jobfabric placed them on",
		Long: `Run beside slurmctld. Every held Slurm job (sbatch --hold, or held at submit by
the job_submit.lua of jobfabric slurm job-submit-lua) becomes one jobfabric
job with externalId slurm:CLUSTER:JOBID: tenant from the Slurm account, workspace
from the QOS or partition (--account-map), GPUs from --gres=gpu:N per node or
--gpus=N, the node count and the time limit. When the jobfabric job is Ready the
bridge sets the Slurm job's ReqNodeList to the placed servers and releases it. A
job jobfabric cannot take stays held with a "jobfabric: ..." Comment. A jobfabric
job cancelled cancels its Slurm job (scancel); a Slurm job cancelled cancels the
jobfabric job, one that ends reports its outcome; a live jobfabric job whose Slurm
job squeue no longer shows is cancelled.

Slurm's node states reach jobfabric: a node sinfo shows DOWN, DRAINED,
DRAINING, FAIL or NOT_RESPONDING (or a placed server Slurm does not have) is
cordoned with Slurm's state and reason, and uncordoned when Slurm can use it
again. A Ready job placed on such a node is not released but handed back
(reported rejected: jobfabric requeues it and places it elsewhere); a released
job still pending for its nodes after --stuck-after is held again and handed
back the same way.

The token is a platform runtime token (token create --role runtime), or an admin
token: it submits and cancels the mapped tenants' mirrors. The account map (YAML):

  accounts:            # Slurm account: jobfabric tenant; unlisted accounts stay held
    phys: acme
  workspaces:          # QOS or partition: workspace (QOS first)
    gpu: training
  defaultWorkspace: main

Without --account-map the account is the tenant and the QOS (else the partition)
the workspace. The account decides the tenant, so slurmctld must check that a user
may use it (slurmdbd with AccountingStorageEnforce=associations); the bridge
refuses to start otherwise, unless --allow-unenforced-accounts. The Prolog finds the job with --id-prefix slurm:CLUSTER. See
docs/slurm.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var m slurm.Mapping
			if accountMap != "" {
				var err error
				if m, err = slurm.LoadMapping(accountMap); err != nil {
					return domain.Invalid("account-map", "%v", err)
				}
			}
			if interval <= 0 {
				return domain.Invalid("interval", "--interval %s must be above 0", interval)
			}
			if stuckAfter <= 0 {
				return domain.Invalid("stuck-after", "--stuck-after %s must be above 0", stuckAfter)
			}
			run := slurm.ExecRunner{}
			if slurmConf != "" {
				run.Env = []string{"SLURM_CONF=" + slurmConf}
			}
			out, err := run.Command(cmd.Context(), "scontrol", "show", "config")
			if err != nil {
				return fmt.Errorf("read slurmctld's configuration (scontrol show config): %w", err)
			}
			config := configValues(string(out))
			// The Slurm account is the tenant: where Slurm does not check
			// that a user may use an account, any user runs as any tenant.
			if why := unenforcedAccounts(config); why != "" && !unenforced {
				return domain.Invalid("allow-unenforced-accounts", "%s: any Slurm user can then submit under any account, that is as any tenant (its quota, its network). "+
					"Run slurmdbd with AccountingStorageEnforce=associations (or limits, qos, safe, all), or give --allow-unenforced-accounts where every Slurm user may act for every mapped tenant", why)
			}
			if cluster == "" {
				cluster = config["ClusterName"]
				if cluster == "" {
					return domain.Invalid("cluster", "scontrol show config names no ClusterName: give --cluster")
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			logw := g.stderr
			if once {
				logw = io.Discard
			}
			b, err := slurm.New(slurm.Config{Cluster: cluster, Slurm: run, API: c, Mapping: m, Interval: interval, StuckAfter: stuckAfter, Clock: tstime.Std{},
				Logger: slog.New(slog.NewTextHandler(logw, nil))})
			if err != nil {
				return err
			}
			if once {
				st, err := b.Sync(cmd.Context())
				if err != nil {
					return err
				}
				return g.emit(st, func(w io.Writer) {
					fmt.Fprintf(w, "submitted %d, released %d, kept held %d, cancelled %d, reported %d, preempted %d, rejected %d, signalled %d, moved %d\n", st.Submitted, st.Released, st.Held, st.Cancelled, st.Reported, st.Preempted, st.Rejected, st.Signalled, st.Moved)
				})
			}
			err = b.Run(cmd.Context())
			if cmd.Context().Err() != nil {
				return nil // stopped by a signal
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "Slurm ClusterName, scoping the external ids (default: from scontrol show config)")
	f.StringVar(&accountMap, "account-map", "", "YAML file mapping Slurm accounts to tenants and QOS/partitions to workspaces")
	f.StringVar(&slurmConf, "slurm-conf", "", "slurm.conf the Slurm commands read (sets SLURM_CONF; default: theirs)")
	f.DurationVar(&interval, "interval", time.Second, "time between passes over the Slurm queue")
	f.DurationVar(&stuckAfter, "stuck-after", time.Minute, "how long a released job may stay pending for its nodes (ReqNodeNotAvail, NodeDown) before it is held again and placed elsewhere")
	f.BoolVar(&once, "once", false, "make one pass, print what it did and exit")
	f.BoolVar(&unenforced, "allow-unenforced-accounts", false, "run although slurmctld does not check that a user may use an account (no AccountingStorageEnforce=associations): every Slurm user can then act for every mapped tenant")
	return cmd
}

// configValues reads scontrol show config's "Key = value" lines.
func configValues(config string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(config, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// unenforcedAccounts says why slurmctld lets a user submit under an
// account it is not associated with, "" when it checks: accounting must be
// stored (slurmdbd) and AccountingStorageEnforce must include associations
// or an option that implies it (limits, qos, safe, wckeys, all).
func unenforcedAccounts(config map[string]string) string {
	typ := config["AccountingStorageType"]
	if typ == "" || strings.HasSuffix(typ, "/none") {
		return fmt.Sprintf("slurmctld keeps no accounting (AccountingStorageType=%s), so it cannot check accounts", cmp.Or(typ, "unset"))
	}
	enforce := config["AccountingStorageEnforce"]
	for _, o := range strings.Split(strings.ToLower(enforce), ",") {
		switch strings.TrimSpace(o) {
		case "associations", "limits", "qos", "safe", "wckeys", "all":
			return ""
		}
	}
	return fmt.Sprintf("slurmctld does not check that a user may use an account (AccountingStorageEnforce=%s)", cmp.Or(enforce, "unset"))
}

func newSlurmJobSubmitLuaCmd(g *globals) *cobra.Command {
	var accountMap string
	cmd := &cobra.Command{
		Use:   "job-submit-lua",
		Short: "Print a job_submit.lua that holds GPU jobs of the bridge's accounts at submit",
		Long: `Print a job_submit.lua for slurmctld (JobSubmitPlugins=lua in slurm.conf, the file
beside slurm.conf): every job asking for GPUs (--gres=gpu:..., --gpus, --gpus-per-*)
of an account in the account map, or of any account without a map, enters held
(priority 0), so jobfabric slurm bridge decides where it runs. Other jobs are left
to Slurm. slurmctld reads the file again when it changes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var m slurm.Mapping
			if accountMap != "" {
				var err error
				if m, err = slurm.LoadMapping(accountMap); err != nil {
					return domain.Invalid("account-map", "%v", err)
				}
			}
			_, err := io.WriteString(g.stdout, slurm.JobSubmitLua(m))
			return err
		},
	}
	cmd.Flags().StringVar(&accountMap, "account-map", "", "the bridge's account map: only its accounts' jobs are held (default: every account)")
	return cmd
}
