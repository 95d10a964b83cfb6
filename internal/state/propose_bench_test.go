package state

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// proposeShaped is what the leader does per command (server.propose) and
// raft's apply then does with the entry: encode, check against the state,
// apply the log entry. The phases are timed apart (phase "encode",
// "check", "apply") or together ("propose").
type proposeShaped struct {
	f     *FSM
	index uint64
}

// entry is an encoded command: its log entry and what it decodes to.
type entry struct {
	c Command
	b []byte
}

func (p *proposeShaped) encode(b *testing.B, ct CommandType, at time.Time, payload any) entry {
	c, e, err := EncodeCommand(ct, RulesLatest, at, "admin:bench", payload)
	if err != nil {
		b.Fatal(err)
	}
	return entry{c, e}
}

func (p *proposeShaped) check(b *testing.B, e entry) {
	if derr := p.f.CheckCommand(e.c); derr != nil {
		b.Fatal(derr)
	}
}

func (p *proposeShaped) apply(b *testing.B, en entry) {
	e := en.b
	p.index++
	if r := p.f.Apply(&raft.Log{Index: p.index, Type: raft.LogCommand, Data: e}).(*Result); r.Err != nil {
		b.Fatal(r.Err)
	}
}

// BenchmarkProposeSubmit and BenchmarkProposePlan are the leader's bytes
// per command (issue 18: the leader's allocation rate sets how often its
// collector marks, and a submit due during a mark waits): a job submit,
// and a scheduler plan (the reasons of 1,000 pending jobs, above
// compressAbove, so gzip-compressed), proposed to a state of 100,000 live
// jobs (2,048 placed). Each submit adds a job; each plan gives its 1,000
// jobs another reason than the last. A submit's apply grows the state's
// maps and slices now and then: run many (-benchtime 10000x) for its
// bytes per submit.
func BenchmarkProposeSubmit(b *testing.B) {
	benchPropose(b, CmdJobSubmit)
}

func BenchmarkProposePlan(b *testing.B) {
	benchPropose(b, CmdPlanApply)
}

func benchPropose(b *testing.B, ct CommandType) {
	h, _ := liveState(b, 100_000)
	p := &proposeShaped{f: h.f, index: 1 << 20}
	pending := h.f.JobIDs(JobFilter{State: domain.JobPending}, nil)
	pending = pending[len(pending)-1000:]
	plans := [2]PlanApply{{Reasons: map[uint64]domain.Reason{}}, {Reasons: map[uint64]domain.Reason{}}}
	for _, id := range pending {
		plans[0].Reasons[id] = domain.Reason{Code: "capacity", Message: "waiting for 1 GPU: 0 of 2048 free on the servers this job may use"}
		plans[1].Reasons[id] = domain.Reason{Code: "workspace_quota", Message: "workspace acme/research holds 2048 of its 2048 GPUs (guaranteed 1024 + borrowLimit 1024)"}
	}
	if e := p.encode(b, CmdPlanApply, h.at, plans[0]).b; len(e) < 2 || e[0] != 0x1f {
		b.Fatalf("the plan command is not compressed (%d bytes)", len(e))
	}
	submit := MakeJob("research", 1).Obj()
	i := 0
	payload := func() any {
		i++
		if ct == CmdPlanApply {
			return plans[i%2]
		}
		return submit
	}
	for _, phase := range []string{"encode", "check", "apply", "propose"} {
		b.Run(phase, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.at = h.at.Add(time.Millisecond)
				switch phase {
				case "encode":
					p.encode(b, ct, h.at, payload())
				case "propose":
					e := p.encode(b, ct, h.at, payload())
					p.check(b, e)
					p.apply(b, e)
				default: // the encode untimed
					b.StopTimer()
					e := p.encode(b, ct, h.at, payload())
					b.StartTimer()
					if phase == "check" {
						p.check(b, e)
					} else {
						p.apply(b, e)
					}
				}
			}
		})
	}
}
