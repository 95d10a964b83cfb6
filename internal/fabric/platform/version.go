package platform

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
)

// Version is a parsed NOS release. Parts compare left to right; a missing
// part counts as 0 (4.32 == 4.32.0).
type Version struct {
	Raw   string
	Parts []int
}

// versionFormats are the release spellings of each NOS; the submatches are
// the numbers compared, in order.
var versionFormats = map[string]struct {
	re      *regexp.Regexp
	example string
}{
	// EOS: 4.32.2F, 4.30.1.1M (train letter: F feature, M maintenance).
	EOS: {regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?[A-Z]*$`), "4.32.2F"},
	// NX-OS: 10.4(3), 10.5(2)F, and the 9.x/7.x form 7.0(3)I7(9).
	NXOS: {regexp.MustCompile(`^(\d+)\.(\d+)\((\d+)[a-z]?\)(?:[A-Z](\d+)\((\d+)[a-z]?\))?[A-Z]?$`), "10.4(3)"},
	// Junos and Junos Evolved: 23.4R2, 22.4R3-S2, 21.4R3-S5.4, 23.4R2-S3-EVO.
	Junos: {regexp.MustCompile(`^(\d+)\.(\d+)R(\d+)(?:-S(\d+)(?:\.(\d+))?)?(?:-EVO)?$`), "23.4R2"},
	// Community SONiC: the release branch and an optional point release,
	// 202405 or 202311.2.
	SONiC: {regexp.MustCompile(`^(20\d{4})(?:\.(\d+))?$`), "202405"},
	// FRR: 10.2, 8.4.4.
	FRR: {regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?$`), "10.2"},
}

// ParseVersion reads a release of nos.
func ParseVersion(nos, s string) (Version, error) {
	f, ok := versionFormats[nos]
	if !ok {
		return Version{}, fmt.Errorf("no version format for NOS %q", nos)
	}
	m := f.re.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%q is not a %s release (e.g. %s)", s, nos, f.example)
	}
	v := Version{Raw: s}
	for _, g := range m[1:] {
		n := 0
		if g != "" {
			var err error
			if n, err = strconv.Atoi(g); err != nil {
				return Version{}, fmt.Errorf("%q: %w", s, err)
			}
		}
		v.Parts = append(v.Parts, n)
	}
	return v, nil
}

// Compare returns -1, 0 or +1 as v is older than, the same as or newer
// than w.
func (v Version) Compare(w Version) int {
	for i := range max(len(v.Parts), len(w.Parts)) {
		if c := cmp.Compare(part(v.Parts, i), part(w.Parts, i)); c != 0 {
			return c
		}
	}
	return 0
}

func part(p []int, i int) int {
	if i < len(p) {
		return p[i]
	}
	return 0
}

func (v Version) String() string { return v.Raw }
