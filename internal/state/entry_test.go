package state

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestLargeCommandsAreCompressed: a topology above compressAbove is stored
// gzip-compressed, applies as the plain command would, and a plain entry
// (written before compression) still applies.
func TestLargeCommandsAreCompressed(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 4, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(CmdTopologyApply, t0, "admin:test", TopologyApply{Topology: *topo})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("a %d-byte topology entry is not compressed", len(b))
	}
	plain, err := Encode(CmdTopologyApply, t0, "admin:test", TopologyApply{})
	if err != nil || plain[0] != '{' {
		t.Fatalf("a small command is compressed or failed: %v", err)
	}
	h := newHarness(t)
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	if got := h.f.Topology().Summary.GPUs; got != 4*32*8 {
		t.Fatalf("applied a compressed topology of %d GPUs, want %d", got, 4*32*8)
	}
	// The same topology as an uncompressed entry of an older log.
	old := New()
	raw, derr := decodeCommand(b)
	if derr != nil {
		t.Fatal(derr)
	}
	uncompressed := mustJSON(t, raw)
	if r := old.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: uncompressed}).(*Result); r.Err != nil {
		t.Fatalf("plain entry: %v", r.Err)
	}
	if old.Topology().Fingerprint != h.f.Topology().Fingerprint {
		t.Fatal("plain and compressed entries applied different topologies")
	}
}

// TestEntryBound: a command that does not fit one log entry is refused by
// Encode with payload_too_large naming the limit; nothing is applied.
func TestEntryBound(t *testing.T) {
	// Random text does not compress below MaxEntryBytes.
	rnd := make([]byte, MaxEntryBytes)
	if _, err := rand.Read(rnd); err != nil {
		t.Fatal(err)
	}
	_, err := Encode(CmdTenantCreate, t0, "admin:test", TenantCreate{Tenant: domain.Tenant{Name: "x", Quota: nil, Sites: []string{hex.EncodeToString(rnd)}}})
	if domain.CodeOf(err) != domain.CodePayloadTooLarge || !strings.Contains(err.Error(), "8388608") || !strings.Contains(err.Error(), "MaxEntryBytes") {
		t.Fatalf("oversize command: %v, want payload_too_large naming the limit of %d bytes", err, MaxEntryBytes)
	}
}

// TestCheckRefusesWithoutApplying: Check answers the state machine's
// refusal and the refusal counter stays 0 when only checked commands are
// applied; an entry applied unchecked and refused is counted.
func TestCheckRefusesWithoutApplying(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	small, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 1, GPUsPerServer: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(CmdTopologyApply, t0, "admin:test", TopologyApply{Topology: *small})
	if err != nil {
		t.Fatal(err)
	}
	if derr := h.f.Check(b); derr == nil || derr.Code != domain.CodeFailedPrecondition {
		t.Fatalf("Check of a topology below the guarantees: %v, want failed_precondition", derr)
	}
	if n := h.f.Refused(); n != 0 {
		t.Fatalf("refused %d entries before any was applied", n)
	}
	h.f.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: b})
	if n := h.f.Refused(); n != 1 {
		t.Fatalf("refused counter %d after one refused entry, want 1", n)
	}
}

func mustJSON(t *testing.T, c Command) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRealisticTopologyFitsOneEntry: a 100,000-GPU topology (50 stripes of
// 250 servers of 8 GPUs, as `jobfabric topology generate` makes it) is one
// log entry well under MaxEntryBytes. (BenchmarkTopologyCommand checks and
// times it; TestLargeCommandsAreCompressed applies a compressed one.)
func TestRealisticTopologyFitsOneEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and applies a 100,000-GPU topology")
	}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 50, ServersPerStripe: 250, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(CmdTopologyApply, t0, "admin:test", TopologyApply{Topology: *topo})
	if err != nil {
		t.Fatal(err)
	}
	// 1.5 MB today: a quarter of the bound leaves room for richer files.
	if len(b) > MaxEntryBytes/4 {
		t.Fatalf("a 100,000-GPU topology is a %d-byte entry; the bound is %d", len(b), MaxEntryBytes)
	}
	t.Logf("100,000-GPU topology: %d-byte entry", len(b))
}

// BenchmarkTopologyCommand measures what the leader does with a
// 100,000-GPU topology before it proposes: encode (compress) and check.
func BenchmarkTopologyCommand(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 50, ServersPerStripe: 250, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	f := New()
	var size int
	for b.Loop() {
		e, err := Encode(CmdTopologyApply, t0, "admin:test", TopologyApply{Topology: *topo})
		if err != nil {
			b.Fatal(err)
		}
		if derr := f.Check(e); derr != nil {
			b.Fatal(derr)
		}
		size = len(e)
	}
	b.ReportMetric(float64(size), "entry-bytes")
}

// TestGzipPoolSameBytes: big commands are compressed and expanded by
// pooled gzip writers and readers; an entry is byte for byte what a new
// writer makes of the command's JSON (entries stay those of older
// binaries), whatever the pooled writer wrote before, and decodes to the
// same command after a reader failed on a corrupt entry.
func TestGzipPoolSameBytes(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[uint64]domain.Reason{}
	for id := range uint64(2000) {
		reasons[id+1] = domain.Reason{Code: "capacity", Message: strings.Repeat("waiting ", int(id%7)+1)}
	}
	cmds := []struct {
		ct      CommandType
		payload any
	}{
		{CmdTopologyApply, TopologyApply{Topology: *topo}},
		{CmdPlanApply, PlanApply{Reasons: reasons}},
		{CmdTopologyApply, TopologyApply{Topology: *topo}},
		{CmdPlanApply, PlanApply{Reasons: reasons, NetworkGate: true}},
	}
	for i, c := range cmds {
		b, err := Encode(c.ct, t0, "admin:test", c.payload)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := json.Marshal(c.payload)
		plain, _ := json.Marshal(Command{Type: c.ct, At: t0, Actor: "admin:test", Payload: p, Rules: RulesLatest})
		var want bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&want, gzip.BestSpeed)
		zw.Write(plain)
		zw.Close()
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("command %d (%s): the entry (%d bytes) is not what a new gzip writer writes (%d bytes)", i, c.ct, len(b), want.Len())
		}
		corrupt := slices.Clone(b)
		corrupt[len(corrupt)-5] ^= 0xff // the checksum
		if _, derr := decodeCommand(corrupt); derr == nil {
			t.Fatalf("command %d: a corrupt entry decoded", i)
		}
		got, derr := decodeCommand(b)
		if derr != nil {
			t.Fatalf("command %d: %v", i, derr)
		}
		if again := mustJSON(t, got); !bytes.Equal(again, plain) {
			t.Fatalf("command %d (%s) decoded to another command", i, c.ct)
		}
	}
}

// TestEncodeCommandIsDecoded: the command EncodeCommand returns, which the
// leader checks (FSM.CheckCommand), is the one the state machine decodes
// from the entry: the same payload JSON, time, actor, type and rules,
// whatever JSON escapes or replaces (an actor or type not UTF-8: without
// reading those back from the entry, the check saw other bytes than
// apply), compressed or not.
func TestEncodeCommandIsDecoded(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	reasons := map[uint64]domain.Reason{}
	for id := range uint64(2000) {
		reasons[id+1] = domain.Reason{Code: "capacity", Message: "waiting for 1 GPU <&>"}
	}
	for _, c := range []struct {
		name    string
		ct      CommandType
		rules   int
		at      time.Time
		actor   string
		payload any
	}{
		{"submit", CmdJobSubmit, RulesLatest, t0, "admin:test", MakeJob("research", 1).Obj()},
		{"no rules", CmdJobSubmit, 0, t0, "admin:test", MakeJob("research", 1).Obj()},
		{"now, in a zone", CmdJobCancel, RulesLatest, time.Now().In(zone), "admin:test", JobCancel{ID: 3}},
		{"zero time, nil payload", CmdJobCancel, 1, time.Time{}, "", nil},
		{"escaped", CmdTenantCreate, RulesLatest, t0, "admin:<a&b>\u2028\"\\", TenantCreate{Tenant: domain.Tenant{Name: "<x>&\u2029\xff"}}},
		{"raw payload, not compact", CmdJobCancel, RulesLatest, t0, "admin:test", json.RawMessage(" { \"id\" : 3 } ")},
		{"actor holds the payload's key", CmdJobCancel, RulesLatest, t0, `x","payload":null,"rules":1}`, JobCancel{ID: 3}},
		{"payload holds the key", CmdJobCancel, RulesLatest, t0, "admin:test", map[string]any{"payload": nil, "rules": 2}},
		{"actor not UTF-8", CmdJobCancel, RulesLatest, t0, "admin:\xff\xfe", JobCancel{ID: 3}},
		{"type not UTF-8", CommandType("job.\xffcancel"), RulesLatest, t0, "admin:test", JobCancel{ID: 3}},
		{"compressed", CmdPlanApply, RulesLatest, t0, "scheduler\xc3", PlanApply{Reasons: reasons}},
		{"compressed, actor holds the payload's key", CmdPlanApply, RulesLatest, t0, `x","payload":null,"rules":1}`, PlanApply{Reasons: reasons}},
		// The payload below compressAbove, the command above.
		{"compressed, small payload", CmdJobCancel, RulesLatest, t0, "admin:test", strings.Repeat("a", compressAbove-10)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, b, err := EncodeCommand(c.ct, c.rules, c.at, c.actor, c.payload)
			if err != nil {
				t.Fatal(err)
			}
			want, derr := decodeCommand(b)
			if derr != nil {
				t.Fatal(derr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("EncodeCommand returned\n%+v\nthe entry decodes to\n%+v", got, want)
			}
			if old, _ := EncodeRules(c.ct, c.rules, c.at, c.actor, c.payload); !bytes.Equal(old, b) {
				t.Fatal("EncodeCommand's entry is not EncodeRules'")
			}
			// The entry is the JSON of the whole command, as binaries
			// before the envelope wrote it (gzip'd above compressAbove,
			// which TestGzipPoolSameBytes compares).
			p, _ := json.Marshal(c.payload)
			plain, _ := json.Marshal(Command{Type: c.ct, At: c.at.UTC(), Actor: c.actor, Payload: p, Rules: c.rules})
			if len(plain) <= compressAbove && !bytes.Equal(plain, b) {
				t.Fatalf("the entry is\n%s\njson.Marshal of the command is\n%s", b, plain)
			}
			if len(plain) > compressAbove {
				var expanded bytes.Buffer
				if err := inflate(&expanded, b); err != nil || !bytes.Equal(expanded.Bytes(), plain) {
					t.Fatalf("the compressed entry does not expand to json.Marshal of the command (%v)", err)
				}
			}
		})
	}
}
