package slurm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// squeueFormat is the squeue -o format the bridge reads: job id, state,
// reason, account, partition, QOS, node count, TRES per node, time limit,
// node list and comment. The comment is free text and comes last, so a '|'
// in it does not shift the other fields.
const squeueFormat = "%i|%T|%r|%a|%P|%q|%D|%b|%l|%N|%k"

// squeueArgs read every job of every state, in every partition: -a shows
// the jobs of hidden partitions (Hidden=YES) and of partitions the
// bridge's user is not allowed in, which squeue leaves out otherwise (a
// bridge not run as root or SlurmUser would never see them).
var squeueArgs = []string{"-h", "-a", "-t", "all", "-o", squeueFormat}

// Job is one Slurm job as squeue shows it.
type Job struct {
	ID        string
	State     string // PENDING, CONFIGURING, RUNNING, CANCELLED...
	Reason    string // JobHeldUser, JobHeldAdmin, None...
	Account   string
	Partition string
	QOS       string // "" when the job has none
	Nodes     int
	// TresPerNode is what --gres asked of each node (gres:gpu:8); "" when
	// nothing. TresPerJob (--gpus) is not in squeue's -o fields: it is read
	// with scontrol show job when needed.
	TresPerNode string
	TresPerJob  string
	TimeLimit   time.Duration // 0: none
	NodeList    string
	Comment     string
}

// Held reports whether the job waits for a release: the state the bridge
// acts on. A job the bridge requeued held (scontrol requeuehold) waits
// with the reason "job requeued in held state".
func (j *Job) Held() bool {
	return j.State == "PENDING" && (j.Reason == "JobHeldUser" || j.Reason == "JobHeldAdmin" || j.Reason == "job requeued in held state")
}

// Ended reports whether Slurm is done with the job.
func (j *Job) Ended() bool {
	switch j.State {
	case "CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED":
		return true
	}
	return false
}

// nullable reads Slurm's "(null)" and "N/A" as empty.
func nullable(s string) string {
	if s == "(null)" || s == "N/A" {
		return ""
	}
	return s
}

// ParseSqueue reads the output of squeue -h -o squeueFormat.
func ParseSqueue(out string) ([]Job, error) {
	var jobs []Job
	for n, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", 11)
		if len(f) != 11 {
			return nil, fmt.Errorf("squeue line %d %q: %d fields, want 11 (%s)", n+1, line, len(f), squeueFormat)
		}
		nodes, err := strconv.Atoi(f[6])
		if err != nil {
			return nil, fmt.Errorf("squeue line %d: job %s: node count %q: %w", n+1, f[0], f[6], err)
		}
		limit, err := ParseTimeLimit(f[8])
		if err != nil {
			return nil, fmt.Errorf("squeue line %d: job %s: %w", n+1, f[0], err)
		}
		jobs = append(jobs, Job{ID: f[0], State: f[1], Reason: f[2], Account: nullable(f[3]), Partition: nullable(f[4]), QOS: nullable(f[5]),
			Nodes: nodes, TresPerNode: nullable(f[7]), TimeLimit: limit, NodeList: f[9], Comment: nullable(f[10])})
	}
	return jobs, nil
}

// ParseShowJob reads one line of scontrol show job -o into its fields
// (values without spaces; the bridge reads only such fields).
func ParseShowJob(out string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(out) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// ParseTimeLimit reads Slurm's time limits: UNLIMITED, [days-]hours:minutes:seconds,
// minutes:seconds, or minutes.
func ParseTimeLimit(s string) (time.Duration, error) {
	switch s {
	case "UNLIMITED", "INFINITE", "NOT_SET", "N/A", "":
		return 0, nil
	}
	bad := fmt.Errorf("time limit %q is not [days-]hh:mm:ss, mm:ss or UNLIMITED", s)
	var days int
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, bad
	}
	var nums []int
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, bad
		}
		nums = append(nums, n)
	}
	var h, m, sec int
	switch len(nums) {
	case 1:
		m = nums[0]
	case 2:
		m, sec = nums[0], nums[1]
	case 3:
		h, m, sec = nums[0], nums[1], nums[2]
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}

// GPUCount reads the GPUs of a TRES list such as "gres:gpu:8",
// "gres/gpu:h100:8" or "cpu=2,gres/gpu=4"; 0 when it asks for none. A GPU
// entry without a count is one GPU.
func GPUCount(tres string) (int, error) {
	for _, e := range strings.Split(tres, ",") {
		e = strings.TrimPrefix(strings.TrimPrefix(e, "gres:"), "gres/")
		e = strings.ReplaceAll(e, "=", ":")
		f := strings.Split(e, ":")
		if f[0] != "gpu" {
			continue
		}
		if len(f) == 1 {
			return 1, nil
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil || n < 0 {
			if len(f) == 2 { // gpu:h100, a type without a count
				return 1, nil
			}
			return 0, fmt.Errorf("GPU count in %q: %q is not a number", tres, f[len(f)-1])
		}
		return n, nil
	}
	return 0, nil
}

// ExpandHostlist reads a Slurm hostlist such as "gpu[0001-0003,0007],n1"
// into its names, in order. It reads one bracket per name (what squeue
// prints for named nodes); anything else is an error.
func ExpandHostlist(hl string) ([]string, error) {
	var out []string
	for hl != "" {
		// The next name: up to a comma outside brackets.
		end, depth := len(hl), 0
		for i, c := range hl {
			switch {
			case c == '[':
				depth++
			case c == ']':
				depth--
			case c == ',' && depth == 0:
				end = i
			}
			if end != len(hl) {
				break
			}
		}
		item := hl[:end]
		hl = strings.TrimPrefix(hl[end:], ",")
		open := strings.IndexByte(item, '[')
		if open < 0 {
			out = append(out, item)
			continue
		}
		shut := strings.IndexByte(item, ']')
		if shut < open || strings.ContainsAny(item[shut+1:], "[]") {
			return nil, fmt.Errorf("hostlist %q: one bracket per name", item)
		}
		prefix, suffix := item[:open], item[shut+1:]
		for _, r := range strings.Split(item[open+1:shut], ",") {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || b-a > 1<<20 {
				return nil, fmt.Errorf("hostlist %q: range %q", item, r)
			}
			for n := a; n <= b; n++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), n, suffix))
			}
		}
	}
	return out, nil
}
