package slurm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// JobSubmitLua is a job_submit.lua for slurmctld (JobSubmitPlugins=lua,
// the file beside slurm.conf) that holds, at submit, every job asking for
// GPUs (--gres=gpu..., --gpus, --gpus-per-node/-task/-socket) of the
// accounts the bridge serves: those of m's account map, or every account
// when m maps none (the account is then the tenant). A held job has
// priority 0 until the bridge releases it on jobfabric's placement; other
// jobs are Slurm's alone.
func JobSubmitLua(m Mapping) string {
	var b strings.Builder
	b.WriteString(`-- job_submit.lua written by jobfabric slurm job-submit-lua (JobSubmitPlugins=lua).
-- GPU jobs of the accounts below enter held (priority 0): jobfabric slurm bridge
-- submits each to jobfabric and releases it on the servers jobfabric placed it on.
`)
	if len(m.Accounts) == 0 {
		b.WriteString("local every_account = true -- no account map: the account is the tenant\nlocal accounts = {}\n")
	} else {
		b.WriteString("local every_account = false\nlocal accounts = {\n")
		for _, a := range slices.Sorted(maps.Keys(m.Accounts)) {
			fmt.Fprintf(&b, "  [%q] = true, -- tenant %s\n", a, m.Accounts[a])
		}
		b.WriteString("}\n")
	}
	b.WriteString(`
local function asks_gpu(tres)
  return tres ~= nil and string.find(tres, "gpu", 1, true) ~= nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not every_account and (job_desc.account == nil or not accounts[job_desc.account]) then
    return slurm.SUCCESS
  end
  if asks_gpu(job_desc.tres_per_node) or asks_gpu(job_desc.tres_per_job) or
     asks_gpu(job_desc.tres_per_task) or asks_gpu(job_desc.tres_per_socket) then
    job_desc.priority = 0
    slurm.log_info("jobfabric: job of account %s held for the bridge", tostring(job_desc.account))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
`)
	return b.String()
}
