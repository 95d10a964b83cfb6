package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fileutil"
)

// newJobEnvCmd is `jobfabric job env ID --node N`: the job's binding on a
// node as export lines, a CDI spec or JSON.
func newJobEnvCmd(g *globals) *cobra.Command {
	var node, format, cdiDir string
	cmd := &cobra.Command{
		Use:   "env ID",
		Short: "What a host applies for the job on a node: export lines (eval them), a CDI spec, or JSON",
		Long: `Print the job's binding on a node: the GPUs or MIG devices it holds (by UUID),
the RDMA NICs on their rails (NCCL_IB_HCA with exact-match names and ports,
NCCL_SOCKET_IFNAME, NCCL_IB_GID_INDEX for RoCE v2, UCX_NET_DEVICES,
NCCL_CROSS_NIC=0 on rail-optimized fabrics), CPU/NUMA affinity and the
job's fabric identity.

  eval "$(jobfabric job env 42 --node gpu-a1)"
  jobfabric job env 42 --node gpu-a1 --format cdi > /etc/cdi/jobfabric-job-42.json
  podman run --device jobfabric.io/job=job-42 ...
  jobfabric job env 42 --node gpu-a1 --format libvirt   # <hostdev> elements for a VM`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return domain.Invalid("id", "job id %q is not a positive integer", args[0])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			b, err := c.Binding(cmd.Context(), id, node)
			if err != nil {
				return err
			}
			for _, w := range b.Warnings {
				fmt.Fprintln(g.stderr, "warning:", w)
			}
			if cdiDir != "" {
				p, err := writeCDI(cdiDir, b)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "CDI spec written to %s (device %s=%s)\n", p, binding.CDIKind, binding.CDIDeviceName(b.Job))
			}
			switch format {
			case "env":
				if g.isStructured() {
					return g.emit(b, nil)
				}
				_, err = io.WriteString(g.stdout, b.Shell())
				return err
			case "cdi":
				js, err := b.CDIJSON()
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(js)
				return err
			case "json":
				g.output = "json"
				return g.emit(b, nil)
			case "libvirt":
				x, err := b.LibvirtXML()
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(x)
				return err
			}
			return domain.Invalid("format", "format %q is not one of env, cdi, json, libvirt", format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "the node (default: the job's only node)")
	f.StringVar(&format, "format", "env", "env (export lines), cdi (a CDI spec, cdiVersion 0.6.0), json (the whole binding) or libvirt (PCI hostdevs of the GPUs and rail NICs, for a VM)")
	f.StringVar(&cdiDir, "cdi-dir", "", "also write the CDI spec into this directory (e.g. /var/run/cdi)")
	return cmd
}

func writeCDI(dir string, b *binding.Binding) (string, error) {
	js, err := b.CDIJSON()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("jobfabric-job-%d.json", b.Job))
	if err := fileutil.WriteAtomic(p, js, 0o644); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	return p, nil
}

// slurmEnv is what the Slurm integration reads of its environment.
type slurmEnv struct {
	jobID, node, account, exit string
}

func readSlurmEnv(node string) (slurmEnv, error) {
	e := slurmEnv{jobID: os.Getenv("SLURM_JOB_ID"), node: node, account: os.Getenv("SLURM_JOB_ACCOUNT"), exit: os.Getenv("SLURM_JOB_EXIT_CODE2")}
	if e.jobID == "" {
		e.jobID = os.Getenv("SLURM_JOBID")
	}
	if e.jobID == "" {
		return e, domain.Invalid("SLURM_JOB_ID", "SLURM_JOB_ID is not set: run this as a Slurm Prolog, TaskProlog or Epilog")
	}
	if e.node == "" {
		e.node = os.Getenv("SLURMD_NODENAME")
	}
	return e, nil
}

// slurmFlags are the flags every slurm subcommand shares.
type slurmFlags struct {
	node, prefix, spool, cdiDir, accountCheck string
	wait                                      time.Duration
	require                                   bool
}

func (sf *slurmFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&sf.node, "node", "", "this node's name in the inventory (default: SLURMD_NODENAME)")
	f.StringVar(&sf.prefix, "id-prefix", "slurm", "jobs are found by externalId PREFIX:SLURM_JOB_ID")
	f.StringVar(&sf.spool, "spool", "", "directory where the Prolog leaves each job's task environment for the TaskProlog (e.g. /run/jobfabric)")
	f.StringVar(&sf.cdiDir, "cdi-dir", "", "directory for the job's CDI spec (e.g. /var/run/cdi)")
	f.StringVar(&sf.accountCheck, "account-check", "tenant", "tenant: the Slurm account (SLURM_JOB_ACCOUNT) must be the job's tenant; none: no check")
	f.BoolVar(&sf.require, "require", false, "fail for a Slurm job jobfabric does not know (default: let it run without a binding)")
	f.DurationVar(&sf.wait, "wait", 5*time.Minute, "how long the Prolog waits for a placed job's network to be ready")
}

func (sf *slurmFlags) spoolFile(jobID string) string {
	return filepath.Join(sf.spool, "slurm-"+jobID+".env")
}

// find returns the jobfabric job of the Slurm job, nil when there is none
// and --require is off.
func (sf *slurmFlags) find(ctx context.Context, g *globals, c *client.Client, e slurmEnv) (*domain.Job, error) {
	ext := sf.prefix + ":" + e.jobID
	// Each tenant's runtime ids are its own: with the account check, the
	// job is the account's (another tenant's job with the id, made by a
	// tenant that guessed it, is never bound); without it, the node's
	// agent must see only one tenant's job with the id.
	tenant := ""
	if sf.accountCheck == "tenant" {
		tenant = e.account
	}
	j, err := c.JobByExternalID(ctx, ext, tenant)
	if tenant != "" && domain.CodeOf(err) == domain.CodeNotFound {
		// None of the account's. Another tenant's job with the id that
		// this node's agent sees (one placed here) is refused below:
		// the Slurm job must not run unbound beside GPUs another tenant
		// holds.
		if other, oerr := c.JobByExternalID(ctx, ext, ""); oerr == nil {
			j, err = other, nil
		} else if domain.CodeOf(oerr) != domain.CodeNotFound {
			err = oerr
		}
	}
	if domain.CodeOf(err) == domain.CodeNotFound && !sf.require {
		fmt.Fprintf(g.stderr, "jobfabric: no job with externalId %s: Slurm job %s runs without a jobfabric binding\n", ext, e.jobID)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch sf.accountCheck {
	case "none":
	case "tenant":
		if e.account != j.Tenant {
			return nil, &domain.Error{Code: domain.CodePermissionDenied, Field: "SLURM_JOB_ACCOUNT",
				Message: fmt.Sprintf("Slurm job %s runs under account %q, but jobfabric job %d (%s) belongs to tenant %q: refusing to bind another tenant's GPUs", e.jobID, e.account, j.ID, ext, j.Tenant)}
		}
	default:
		return nil, domain.Invalid("account-check", "account-check %q is not one of tenant, none", sf.accountCheck)
	}
	return j, nil
}

// bind waits (up to --wait) for a placed job's network and returns its
// binding on the node.
func (sf *slurmFlags) bind(ctx context.Context, c *client.Client, j *domain.Job, e slurmEnv) (*binding.Binding, *domain.Job, error) {
	deadline := time.Now().Add(sf.wait)
	for j.State == domain.JobPlaced || j.State == domain.JobPending {
		if time.Now().After(deadline) {
			return nil, j, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "state",
				Message: fmt.Sprintf("jobfabric job %d is still %s after %s: %s", j.ID, j.State, sf.wait, reasonOf(j))}
		}
		select {
		case <-ctx.Done():
			return nil, j, ctx.Err()
		case <-time.After(time.Second):
		}
		var err error
		if j, err = c.JobByExternalID(ctx, j.ExternalID, j.Tenant); err != nil {
			return nil, j, err
		}
	}
	b, err := c.Binding(ctx, j.ID, e.node)
	return b, j, err
}

func reasonOf(j *domain.Job) string {
	if j.Reason != nil {
		return j.Reason.Message
	}
	return "no reason given"
}

func newSlurmCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slurm",
		Short: "Slurm integration: the bridge that releases held jobs where jobfabric placed them; Prolog, TaskProlog and Epilog that bind a Slurm job to its jobfabric job",
		Long: `Slurm integration. A Slurm job is tied to its jobfabric job by externalId
(jobfabric job submit --external-id slurm:$SLURM_JOB_ID). In slurm.conf:

  Prolog=/usr/local/sbin/jobfabric-prolog          # jobfabric slurm prolog --spool /run/jobfabric --cdi-dir /var/run/cdi
  TaskProlog=/usr/local/bin/jobfabric-task-prolog  # jobfabric slurm task-prolog --spool /run/jobfabric
  Epilog=/usr/local/sbin/jobfabric-epilog          # jobfabric slurm epilog --spool /run/jobfabric --cdi-dir /var/run/cdi
  EpilogSlurmctld=/usr/local/sbin/jobfabric-epilog # reports the job succeeded or failed (SLURM_JOB_EXIT_CODE2)

See docs/operations.md.`,
	}
	var pf, tf, ef slurmFlags
	prolog := &cobra.Command{
		Use:   "prolog",
		Short: "Check the job is placed on this node, leave its task environment and CDI spec, report it running; print the export lines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := readSlurmEnv(pf.node)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := pf.find(cmd.Context(), g, c, e)
			if err != nil || j == nil {
				return err
			}
			b, j, err := pf.bind(cmd.Context(), c, j, e)
			if err != nil {
				return err
			}
			lines, err := b.TaskProlog()
			if err != nil {
				return err
			}
			for _, w := range b.Warnings {
				fmt.Fprintln(g.stderr, "jobfabric: warning:", w)
			}
			if pf.spool != "" {
				if err := os.MkdirAll(pf.spool, 0o755); err != nil {
					return fmt.Errorf("spool: %w", err)
				}
				if err := fileutil.WriteAtomic(pf.spoolFile(e.jobID), []byte(lines), 0o644); err != nil {
					return fmt.Errorf("spool: %w", err)
				}
			}
			if pf.cdiDir != "" {
				if _, err := writeCDI(pf.cdiDir, b); err != nil {
					return err
				}
			}
			if j.State == domain.JobReady {
				_, err := c.ReportNodeJob(cmd.Context(), b.Node, j.ID, "running", "Slurm job "+e.jobID+" started on "+b.Node)
				if err != nil && domain.CodeOf(err) != domain.CodeFailedPrecondition {
					return err
				}
			}
			_, err = io.WriteString(g.stdout, lines)
			return err
		},
	}
	pf.add(prolog)
	task := &cobra.Command{
		Use:   "task-prolog",
		Short: "Print the task environment as `export NAME=value` lines (from the Prolog's spool file, else from the server)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := readSlurmEnv(tf.node)
			if err != nil {
				return err
			}
			if tf.spool != "" {
				b, err := os.ReadFile(tf.spoolFile(e.jobID))
				if err == nil {
					_, err = g.stdout.Write(b)
					return err
				}
				if !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("spool: %w", err)
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := tf.find(cmd.Context(), g, c, e)
			if err != nil || j == nil {
				return err
			}
			b, _, err := tf.bind(cmd.Context(), c, j, e)
			if err != nil {
				return err
			}
			lines, err := b.TaskProlog()
			if err != nil {
				return err
			}
			_, err = io.WriteString(g.stdout, lines)
			return err
		},
	}
	tf.add(task)
	epilog := &cobra.Command{
		Use:   "epilog",
		Short: "Remove the job's spool file and CDI spec; as EpilogSlurmctld report the job succeeded or failed, on a node report a preempted job stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := readSlurmEnv(ef.node)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := ef.find(cmd.Context(), g, c, e)
			if err != nil || j == nil {
				return err
			}
			if ef.spool != "" {
				if err := os.Remove(ef.spoolFile(e.jobID)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("spool: %w", err)
				}
			}
			if ef.cdiDir != "" {
				if err := os.Remove(filepath.Join(ef.cdiDir, fmt.Sprintf("jobfabric-job-%d.json", j.ID))); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("cdi: %w", err)
				}
			}
			state, msg := "", ""
			switch {
			case e.exit != "":
				// EpilogSlurmctld: the job's exit code as "exit:signal".
				state, msg = "succeeded", "Slurm job "+e.jobID+" exited "+e.exit
				if e.exit != "0:0" {
					state = "failed"
				}
			case j.State == domain.JobPreempting:
				state, msg = "stopped", "Slurm job "+e.jobID+" ended on "+e.node
			default:
				return nil
			}
			if e.node != "" && e.exit == "" {
				_, err = c.ReportNodeJob(cmd.Context(), e.node, j.ID, state, msg)
			} else {
				_, err = c.Report(cmd.Context(), j.ID, state, msg)
			}
			if domain.CodeOf(err) == domain.CodeFailedPrecondition {
				fmt.Fprintf(g.stderr, "jobfabric: job %d: %v\n", j.ID, strings.TrimSpace(describe(nil, err, true)))
				return nil // already ended, or ended by another node's epilog
			}
			return err
		},
	}
	ef.add(epilog)
	cmd.AddCommand(prolog, task, epilog, newSlurmBridgeCmd(g), newSlurmJobSubmitLuaCmd(g)) // slurmbridge.go
	return cmd
}
