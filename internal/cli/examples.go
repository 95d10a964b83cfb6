package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples holds the Example section of each command, by command path
// without the leading "jobfabric", where a command does not set its own.
// One table keeps them consistent; TestEveryCommandHasExample keeps it
// complete.
var examples = map[string]string{
	"": `jobfabric config set-context lab --server http://127.0.0.1:7070 --token-file /tmp/jf/admin.token
jobfabric job list --state pending,running
jobfabric --context prod node list -o wide`,
	"agent":       "jobfabric agent --node s1-gpu001 --interval 15s\njobfabric agent --node s1-gpu001 --fixture internal/hostfacts/testdata/hosts/h100-roce --once",
	"agent facts": "jobfabric agent facts\njobfabric agent facts -o json",

	"bench":             "jobfabric bench submit --servers 3 --runs 3\njobfabric bench sched --stripes 4",
	"bench fabric":      "jobfabric bench fabric --stripes 4 --tenants 64\njobfabric bench fabric --stripes 196 --pods 4 --super-spines 4 --tenants 5000 --jobs 50176 --vrfs used -o json > fabric-100k.json",
	"bench fabric-plot": "jobfabric bench fabric-plot --out docs/bench/fabric-scale.svg fabric-16k.json fabric-100k.json",
	"bench sched-plot":  "jobfabric bench sched-plot --out docs/scale/sched-scale.svg sched-16k.json sched-100k.json",
	"bench sched":       "jobfabric bench sched --stripes 4 --jobs 2000",
	"bench soak":        "jobfabric bench soak --jobs 20000 --samples 10 --out /tmp/soak\njobfabric bench soak --jobs 1000000 --samples 20 --out docs/scale/soak1m -o json",
	"bench soak-plot":   "jobfabric bench soak-plot docs/scale/soak1m --jobs 1000000",
	"bench submit":      "jobfabric bench submit --servers 1 --runs 3\njobfabric bench submit --servers 3 --via-follower --concurrency 64\njobfabric bench submit --servers 3 --processes --rate 1000 --preload 100000 --leader-cpuprofile leader.pprof",

	"server migrate-log-store": "jobfabric server migrate-log-store --data-dir /var/lib/jobfabric --to wal",

	"cluster":        "jobfabric cluster status\njobfabric cluster remove jf3",
	"cluster remove": "jobfabric cluster remove jf3",
	"cluster secret": "jobfabric cluster secret > /etc/jobfabric/cluster.secret",
	"cluster status": "jobfabric cluster status\njobfabric --server http://10.0.0.1:7070 cluster status -o json",

	"completion":            "jobfabric completion bash > /etc/bash_completion.d/jobfabric\nsource <(jobfabric completion zsh)",
	"completion bash":       "jobfabric completion bash > /etc/bash_completion.d/jobfabric",
	"completion zsh":        "jobfabric completion zsh > \"${fpath[1]}/_jobfabric\"",
	"completion fish":       "jobfabric completion fish > ~/.config/fish/completions/jobfabric.fish",
	"completion powershell": "jobfabric completion powershell | Out-String | Invoke-Expression",
	"help":                  "jobfabric help job submit",

	"config": "jobfabric config set-context prod --server https://jf.example.com:7070 --ca ca.pem --token-file prod.token\njobfabric config use-context prod\njobfabric config get-contexts",

	"demo":   "jobfabric demo\njobfabric demo --listen 127.0.0.1:7070 --stripes 2",
	"events": "jobfabric events --tenant acme --since 1h\njobfabric events --limit 20 -o json",
	"usage":  "jobfabric usage --tenant acme --since 30d\njobfabric usage --tenant acme --since 2026-11-01T00:00:00Z --until 2026-12-01T00:00:00Z --by workspace -o csv\njobfabric usage --since 12h --by job -o json",

	"fabric":           "jobfabric fabric status\njobfabric fabric diff",
	"fabric deploy":    "jobfabric fabric deploy",
	"fabric diff":      "jobfabric fabric diff\njobfabric fabric diff --from 3 --to 5 --device s1-leaf0",
	"fabric render":    "jobfabric fabric render --device s1-leaf0 --nos junos\njobfabric fabric render --rev 4",
	"fabric revisions": "jobfabric fabric revisions",
	"fabric status":    "jobfabric fabric status\njobfabric fabric status -o json",
	"fabric hotspots":  "jobfabric fabric hotspots\njobfabric fabric hotspots --limit 10 -o json",
	"fabric verify":    "jobfabric fabric verify\njobfabric fabric verify --matrix",

	"host":        "jobfabric host list\njobfabric host show s1-gpu001",
	"host accept": "jobfabric host accept s1-gpu001",
	"host list":   "jobfabric host list\njobfabric host list -o json",
	"host policy": "jobfabric host policy\njobfabric host policy --heartbeat-timeout 45s --cordon-on driver,gpu-missing,gpu-count\njobfabric host policy --tenant-min-driver acme=550.54",
	"host show":   "jobfabric host show s1-gpu001",

	"job":         "jobfabric job submit --workspace acme/research --gpus 16 --gpus-per-node 8 --name llama-ft\njobfabric job list --state pending,running",
	"job cancel":  "jobfabric job cancel 42",
	"job env":     "jobfabric job env 42 --node s1-gpu001\njobfabric job env 42 --node s1-gpu001 --format cdi\njobfabric job env 42 --format json\njobfabric job env 42 --node s1-gpu001 --format libvirt > job-42-hostdevs.xml",
	"job explain": "jobfabric job explain 42",
	"job health":  "jobfabric job health 42\njobfabric job health 42 -o json",
	"job move":    "jobfabric job move 42 --pool slurm:c1:b\njobfabric job move 42 --pool ''",
	"job list":    "jobfabric job list\njobfabric job list --state pending,running --workspace acme/research\njobfabric job list --limit 100 -o json",
	"job report":  "jobfabric job report 42 --state running --message \"slurm job 4242\"\njobfabric job report 42 --state succeeded",
	"job show":    "jobfabric job show 42\njobfabric job show 42 -o yaml",
	"job submit": `jobfabric job submit --workspace acme/research --gpus 16 --gpus-per-node 8 --gpu-model H100-80GB --name llama-ft
jobfabric job submit --workspace globex/inference --mig 3g.40gb --mig-count 2
jobfabric job submit -f job.yaml --priority 5      # flags override the file
jobfabric job submit -f job.yaml --wait --timeout 10m  # exit 0 once Ready, 6 if it ends first
jobfabric job submit --dry-run --workspace acme/research --gpus 32`,
	"job watch": "jobfabric job watch 42\njobfabric job watch 42 -o json",

	"kube":     "jobfabric --context prod kube run --kubeconfig ~/.kube/config",
	"kube run": "jobfabric --context prod kube run --kubeconfig ~/.kube/config\njobfabric kube run --kubeconfig kubeconfig --server https://jf.example:7070 --interval 5s",

	"lab":        "sudo jobfabric lab up --topology lab.yaml\nsudo jobfabric lab status\nsudo jobfabric lab down",
	"lab down":   "sudo jobfabric lab down",
	"lab ping":   "sudo jobfabric lab ping s1-gpu001/nic0 s1-gpu002/nic1",
	"lab status": "sudo jobfabric lab status\nsudo jobfabric lab status --routes",
	"lab up":     "sudo jobfabric lab up --topology lab.yaml",
	"lab wait":   "sudo jobfabric lab wait --timeout 2m",

	"node":           "jobfabric node list\njobfabric node drain s1-gpu003 --reason firmware",
	"node cordon":    "jobfabric node cordon s1-gpu003 --reason \"bad DIMM\"",
	"node drain":     "jobfabric node drain s1-gpu003 --reason firmware\njobfabric node drain s1-gpu003 --grace 10m --reason firmware",
	"node healthy":   "jobfabric node healthy s1-gpu003 --reason \"DIMM replaced\"",
	"node list":      "jobfabric node list\njobfabric node list -o json",
	"node uncordon":  "jobfabric node uncordon s1-gpu003",
	"node unhealthy": "jobfabric node unhealthy s1-gpu003 --reason \"XID 79\"",

	"pool":        "jobfabric pool list\njobfabric pool set slurm:c1:a100 s1-gpu001 s1-gpu002",
	"pool delete": "jobfabric pool delete slurm:c1:a100",
	"pool list":   "jobfabric pool list\njobfabric pool list -o wide",
	"pool set":    "jobfabric pool set slurm:c1:a100 s1-gpu001 s1-gpu002\njobfabric pool set lowlat --servers-file servers.txt",

	"server": `jobfabric server --data-dir /var/lib/jobfabric --listen 127.0.0.1:7070
jobfabric server --data-dir /srv/jf1 --listen 10.0.0.1:7070 --bootstrap --cluster-secret-file /etc/jobfabric/cluster.secret
jobfabric server --data-dir /srv/jf2 --listen 10.0.0.2:7070 --join http://10.0.0.1:7070 --cluster-secret-file /etc/jobfabric/cluster.secret`,

	"sim":        "jobfabric sim openb --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv --out openb-out\njobfabric sim report openb-out --out docs/sim/openb",
	"sim jobs":   "jobfabric sim jobs --trace cluster01.csv --out jobs-out",
	"sim openb":  "jobfabric sim openb --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv --out openb-out",
	"sim report": "jobfabric sim report openb-out --expected analysis_allo_discrete.csv --out docs/sim/openb",

	"slurm":                "# in slurm.conf:\n#   Prolog=/usr/local/bin/jobfabric-prolog    (runs: jobfabric slurm prolog)\n#   TaskProlog=/usr/local/bin/jobfabric-task  (runs: jobfabric slurm task-prolog)\njobfabric slurm prolog --spool /var/spool/jobfabric",
	"slurm bridge":         "jobfabric slurm bridge --server https://jf.example:7070 --token \"$(cat /etc/jobfabric/bridge.token)\" --account-map /etc/jobfabric/accounts.yaml\njobfabric slurm bridge --once -o json",
	"slurm job-submit-lua": "jobfabric slurm job-submit-lua --account-map /etc/jobfabric/accounts.yaml > /etc/slurm/job_submit.lua",
	"slurm epilog":         "jobfabric slurm epilog --spool /var/spool/jobfabric",
	"slurm prolog":         "jobfabric slurm prolog --spool /var/spool/jobfabric --cdi-dir /var/run/cdi",
	"slurm task-prolog":    "jobfabric slurm task-prolog --spool /var/spool/jobfabric",

	"tenant":        "jobfabric tenant create acme --isolation server --network pure-rt5 --job-segmentation\njobfabric tenant list",
	"tenant create": "jobfabric tenant create acme --isolation server --network pure-rt5 --job-segmentation\njobfabric tenant create globex --isolation gpu --network vlan-aware --guaranteed 64",
	"tenant delete": "jobfabric tenant delete globex",
	"tenant list":   "jobfabric tenant list\njobfabric tenant list -o yaml",
	"tenant show":   "jobfabric tenant show acme",
	"tenant update": "jobfabric tenant update acme --guaranteed 128 --borrow-limit 64\njobfabric tenant update acme --no-quota",

	"token":        "jobfabric token create --role member --workspace acme/research --ttl 24h\njobfabric token list",
	"token create": "jobfabric token create --role tenant-admin --tenant acme\njobfabric token create --role member --workspace acme/research --ttl 24h --description ci\njobfabric token create --role runtime --node s1-gpu001 > /etc/jobfabric/agent.token",
	"token list":   "jobfabric token list",
	"token revoke": "jobfabric token revoke 3f2a9c1d",

	"topology":          "jobfabric topology generate --stripes 2 --servers-per-stripe 16 > cluster.yaml\njobfabric topology apply -f cluster.yaml",
	"topology apply":    "jobfabric topology apply -f cluster.yaml\njobfabric topology apply -f cluster.yaml --dry-run",
	"topology generate": "jobfabric topology generate --stripes 2 --servers-per-stripe 16 --gpus-per-server 8 --gpu-model H100-80GB > cluster.yaml",
	"topology show":     "jobfabric topology show\njobfabric topology show -o yaml",
	"topology export":   "jobfabric topology export --format kueue > kueue-topology.yaml\njobfabric topology export --format volcano > hypernodes.yaml\njobfabric topology export --format slurm > /etc/slurm/topology.conf\njobfabric topology export --format slurm-yaml > /etc/slurm/topology.yaml\njobfabric topology export --format node-labels --file cluster.yaml > label-nodes.sh",
	"topology validate": "jobfabric topology validate -f cluster.yaml",

	"whoami": "jobfabric whoami\njobfabric whoami -o json",

	"workspace":        "jobfabric workspace create acme/research --guaranteed 16 --borrow-limit 32\njobfabric workspace list acme",
	"workspace create": "jobfabric workspace create acme/research --guaranteed 16 --borrow-limit 32 --lend-limit 16 --weight 1 --priority 0\njobfabric workspace create acme/m --guaranteed 8 --model-quota H100-80GB=8",
	"workspace delete": "jobfabric workspace delete acme/research",
	"workspace list":   "jobfabric workspace list acme",
	"workspace show":   "jobfabric workspace show acme/research",
	"workspace update": "jobfabric workspace update acme/research --guaranteed 24\njobfabric workspace update acme/research --no-model-quotas",
}

// addExamples fills in each command's Example from the table, indented as
// cobra's help prints it.
func addExamples(c *cobra.Command) {
	if c.Example == "" {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), c.Root().Name()), " ")
		if ex, ok := examples[path]; ok {
			c.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
		}
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
