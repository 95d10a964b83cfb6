package render

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// lcs is the length of a longest common subsequence, by dynamic
// programming: the reference a shortest edit script is checked against.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// apply replays an edit script on old and checks it is well formed.
func apply(t *testing.T, old, new []string, es []edit) []string {
	t.Helper()
	var out []string
	ai, bi := 0, 0
	for _, e := range es {
		switch e.op {
		case opEqual:
			if e.a != ai || e.b != bi || old[e.a] != new[e.b] {
				t.Fatalf("bad equal %+v at %d,%d", e, ai, bi)
			}
			out = append(out, old[e.a])
			ai++
			bi++
		case opDelete:
			if e.a != ai {
				t.Fatalf("bad delete %+v at %d", e, ai)
			}
			ai++
		case opInsert:
			if e.b != bi {
				t.Fatalf("bad insert %+v at %d", e, bi)
			}
			out = append(out, new[e.b])
			bi++
		}
	}
	if ai != len(old) || bi != len(new) {
		t.Fatalf("script stops at %d,%d of %d,%d", ai, bi, len(old), len(new))
	}
	return out
}

func TestDiffLinesIsAShortestEditScript(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "c", "exit", "!", " x"}
	gen := func() []string {
		s := make([]string, r.IntN(30))
		for i := range s {
			s[i] = alphabet[r.IntN(len(alphabet))]
		}
		return s
	}
	for i := range 2000 {
		old, new := gen(), gen()
		es := diffLines(old, new)
		if got := apply(t, old, new, es); !slices.Equal(got, new) {
			t.Fatalf("case %d: applying the script gives %q, want %q", i, got, new)
		}
		changes := 0
		for _, e := range es {
			if e.op != opEqual {
				changes++
			}
		}
		if want := len(old) + len(new) - 2*lcs(old, new); changes != want {
			t.Fatalf("case %d: %d changes, the minimum is %d\nold %q\nnew %q", i, changes, want, old, new)
		}
	}
}

func TestDiffLinesFallsBackBeyondTheBound(t *testing.T) {
	var old, new []string
	for i := range maxEditDistance + 10 {
		old = append(old, "o"+strings.Repeat("x", i%7)+string(rune('a'+i%26)))
		new = append(new, "n"+string(rune('a'+i%26)))
	}
	if got := apply(t, old, new, diffLines(old, new)); !slices.Equal(got, new) {
		t.Fatal("the wholesale fallback is not a valid script")
	}
}

func TestUnifiedDiffNamesSections(t *testing.T) {
	old := strings.Split("router bgp 1\n neighbor a remote-as 2\n address-family ipv4 unicast\n  network 1.1.1.1/32\n exit-address-family\nexit", "\n")
	new := strings.Split("router bgp 1\n neighbor a remote-as 2\n address-family ipv4 unicast\n  network 1.1.1.1/32\n  neighbor a activate\n exit-address-family\nexit", "\n")
	want := []string{"@@ -4,0 +5,1 @@ router bgp 1 > address-family ipv4 unicast", "+  neighbor a activate"}
	if got := diffUnified(old, new); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSetDiff(t *testing.T) {
	old := "# header\nset a 1\nset b 2\nset c 3\n"
	new := "# other header\nset a 1\nset b 4\nset c 3\nset d 5\n"
	want := []string{"delete b 2", "set b 4", "set d 5"}
	if got := DiffFile("x.set", old, new); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
