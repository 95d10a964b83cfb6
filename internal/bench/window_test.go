package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestSlowBursts(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name string
		subs []timed
		p99  time.Duration
		want []SlowBurst
	}{
		{"none over", []timed{{ms(1), ms(2)}, {ms(5), ms(3)}}, ms(10), nil},
		{"one stall, out of order", []timed{{ms(120), ms(40)}, {ms(100), ms(60)}, {ms(110), ms(2)}, {ms(149), ms(30)}}, ms(30),
			[]SlowBurst{{FromMs: 100, ToMs: 149, Submits: 3, MaxMs: 60}}},
		{"two stalls a gap apart", []timed{{ms(0), ms(12)}, {ms(49), ms(11)}, {ms(99), ms(20)}, {ms(5000), ms(15)}}, ms(11),
			[]SlowBurst{{FromMs: 0, ToMs: 49, Submits: 2, MaxMs: 12}, {FromMs: 99, ToMs: 99, Submits: 1, MaxMs: 20}, {FromMs: 5000, ToMs: 5000, Submits: 1, MaxMs: 15}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := slowBursts(tc.subs, tc.p99); !slices.Equal(got, tc.want) {
				t.Fatalf("slowBursts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSnapshotsIn(t *testing.T) {
	dir := t.TempDir()
	from := time.UnixMilli(1_700_000_000_000)
	for _, name := range []string{
		"3-100-1699999999999", // before the window
		"3-200-1700000000000", // at its start
		"3-300-1700000004250",
		"3-400-1700000010000", // at its end: out
		"3-500-1700000005000.tmp",
		"notes",
	} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "3-600-1700000006000"), nil, 0o600); err != nil {
		t.Fatal(err) // a file, not a snapshot's directory
	}
	if got, want := snapshotsIn(dir, from, from.Add(10*time.Second)), []int64{0, 4250}; !slices.Equal(got, want) {
		t.Fatalf("snapshotsIn = %v, want %v", got, want)
	}
	if got := snapshotsIn(filepath.Join(dir, "missing"), from, from.Add(time.Second)); got != nil {
		t.Fatalf("snapshotsIn of a missing directory = %v, want none", got)
	}
}
