package render

import (
	"fmt"
	"slices"
	"strings"
)

// DeviceDiff is what changes on one device between two renders.
type DeviceDiff struct {
	Device string     `json:"device"`
	NOS    string     `json:"nos"`
	Files  []FileDiff `json:"files"`
}

// FileDiff is what changes in one file. Lines are, for Junos set files, the
// "delete ..." and "set ..." commands that turn the old configuration into
// the new (deletes first); for every other file a unified diff without
// context lines (-U0) whose hunk headers name the enclosing sections (as
// git names the enclosing function), so "+  neighbor swp5 activate" still
// says which router and address family it belongs to.
type FileDiff struct {
	Name string `json:"name"`
	// Change is "added", "removed" or "changed".
	Change string   `json:"change"`
	Lines  []string `json:"lines"`
}

// Diff compares two renders of the fabric, device by device and file by
// file, and returns the devices that change, sorted by name (files sorted by
// name). Devices and files present on one side only are wholly added or
// removed.
func Diff(old, new []DeviceFiles) []DeviceDiff {
	byName := func(ds []DeviceFiles) map[string]DeviceFiles {
		m := make(map[string]DeviceFiles, len(ds))
		for _, d := range ds {
			m[d.Device] = d
		}
		return m
	}
	om, nm := byName(old), byName(new)
	var out []DeviceDiff
	for _, n := range unionKeys(om, nm) {
		o, nw := om[n], nm[n]
		nos := nw.NOS
		if nos == "" {
			nos = o.NOS
		}
		dd := DeviceDiff{Device: n, NOS: nos, Files: DiffFiles(o.Files, nw.Files)}
		if len(dd.Files) > 0 {
			out = append(out, dd)
		}
	}
	return out
}

// DiffFiles compares two file sets of one device.
func DiffFiles(old, new []File) []FileDiff {
	om := map[string]string{}
	for _, f := range old {
		om[f.Name] = f.Content
	}
	nm := map[string]string{}
	for _, f := range new {
		nm[f.Name] = f.Content
	}
	var out []FileDiff
	for _, n := range unionKeys(om, nm) {
		o, inOld := om[n]
		nw, inNew := nm[n]
		if inOld && inNew && o == nw {
			continue
		}
		change := "changed"
		switch {
		case !inOld:
			change = "added"
		case !inNew:
			change = "removed"
		}
		if lines := DiffFile(n, o, nw); len(lines) > 0 {
			out = append(out, FileDiff{Name: n, Change: change, Lines: lines})
		}
	}
	return out
}

// unionKeys lists the names in old, new or both, sorted, once each.
func unionKeys[V any](old, new map[string]V) []string {
	names := make([]string, 0, len(old)+len(new))
	for n := range old {
		names = append(names, n)
	}
	for n := range new {
		if _, ok := old[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// DiffFile compares two versions of one file (named so the format is known:
// *.set files are Junos set commands).
func DiffFile(name, old, new string) []string {
	if strings.HasSuffix(name, ".set") {
		return diffSet(splitLines(old), splitLines(new))
	}
	return diffUnified(splitLines(old), splitLines(new))
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// String renders the diff for people: a header per device, then per file
// the unified headers (or the Junos commands).
func (d DeviceDiff) String() string {
	var b strings.Builder
	for _, f := range d.Files {
		if strings.HasSuffix(f.Name, ".set") {
			fmt.Fprintf(&b, "# %s/%s (%s, %s)\n", d.Device, f.Name, d.NOS, f.Change)
		} else {
			from, to := "a/"+d.Device+"/"+f.Name, "b/"+d.Device+"/"+f.Name
			switch f.Change {
			case "added":
				from = "/dev/null"
			case "removed":
				to = "/dev/null"
			}
			fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, to)
		}
		for _, l := range f.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// diffSet turns set commands into the delete and set commands that get
// from old to new. Junos set configuration is order-free, so the minimal
// change is the multiset difference: deletes (last first, children before
// parents), then sets in their new order.
func diffSet(old, new []string) []string {
	dels := setsMissing(old, new)
	for i, l := range dels {
		dels[i] = "delete " + strings.TrimPrefix(l, "set ")
	}
	slices.Reverse(dels)
	return append(dels, setsMissing(new, old)...)
}

// setsMissing lists, in order, the set commands of lines that others lacks,
// counting repeats: a command twice in lines and once in others is listed
// once.
func setsMissing(lines, others []string) []string {
	count := map[string]int{}
	for _, l := range others {
		if strings.HasPrefix(l, "set ") {
			count[l]++
		}
	}
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "set ") {
			continue
		}
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// diffUnified writes a -U0 unified diff of old and new with section
// context in the hunk headers.
func diffUnified(old, new []string) []string {
	edits := diffLines(old, new)
	var out []string
	for i := 0; i < len(edits); {
		if edits[i].op == opEqual {
			i++
			continue
		}
		j := i
		for j < len(edits) && edits[j].op != opEqual {
			j++
		}
		hunk := edits[i:j]
		// Positions: the old and new line where the hunk starts.
		a0, b0 := edits[i].a, edits[i].b
		var dels, ins []string
		for _, e := range hunk {
			if e.op == opDelete {
				dels = append(dels, "-"+old[e.a])
			} else {
				ins = append(ins, "+"+new[e.b])
			}
		}
		ctx := sectionOf(old, a0)
		if len(dels) == 0 {
			ctx = sectionOf(new, b0)
		}
		hdr := fmt.Sprintf("@@ -%s +%s @@", hunkRange(a0, len(dels)), hunkRange(b0, len(ins)))
		if ctx != "" {
			hdr += " " + ctx
		}
		out = append(out, hdr)
		out = append(out, dels...)
		out = append(out, ins...)
		i = j
	}
	return out
}

// hunkRange is the "start,count" of a unified hunk: 1-based, and for an
// empty range the line after which the change goes.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// sectionOf names the sections enclosing line i: the nearest earlier lines
// with less indentation, outermost first, skipping comments and closers.
func sectionOf(lines []string, i int) string {
	if i >= len(lines) {
		i = len(lines)
	}
	ind := 1 << 30
	if i < len(lines) {
		ind = indentOf(lines[i])
	}
	var chain []string
	for j := i - 1; j >= 0 && ind > 0; j-- {
		l := lines[j]
		t := strings.TrimSpace(l)
		if skipAsSection(t) {
			continue
		}
		if n := indentOf(l); n < ind {
			ind = n
			t = strings.TrimSpace(strings.TrimSuffix(t, "{"))
			chain = append(chain, strings.TrimSuffix(t, ":"))
		}
	}
	slices.Reverse(chain)
	return strings.Join(chain, " > ")
}

func skipAsSection(t string) bool {
	switch t {
	case "", "!", "{", "}", "},", "]", "],", "end", "exit", "exit-vrf", "exit-vni", "exit-address-family":
		return true
	}
	return strings.HasPrefix(t, "#") || strings.HasPrefix(t, "!")
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }

type editOp int8

const (
	opEqual editOp = iota
	opDelete
	opInsert
)

// edit is one step of an edit script: a is the old line index (delete,
// equal, and for an insert the old position it goes before), b the new one.
type edit struct {
	op   editOp
	a, b int
}

// maxEditDistance bounds the Myers search (its memory grows with the
// square of the distance); beyond it the changed middle is replaced
// wholesale, which is still a correct diff.
const maxEditDistance = 2000

// diffLines returns a shortest edit script from old to new (Myers' O(ND)
// algorithm) after trimming the common head and tail.
func diffLines(old, new []string) []edit {
	pre := 0
	for pre < len(old) && pre < len(new) && old[pre] == new[pre] {
		pre++
	}
	suf := 0
	for suf < len(old)-pre && suf < len(new)-pre && old[len(old)-1-suf] == new[len(new)-1-suf] {
		suf++
	}
	var out []edit
	for i := range pre {
		out = append(out, edit{opEqual, i, i})
	}
	a, b := old[pre:len(old)-suf], new[pre:len(new)-suf]
	mid, ok := myers(a, b)
	if !ok {
		mid = nil
		for i := range a {
			mid = append(mid, edit{opDelete, i, 0})
		}
		for j := range b {
			mid = append(mid, edit{opInsert, len(a), j})
		}
	}
	for _, e := range mid {
		e.a += pre
		e.b += pre
		out = append(out, e)
	}
	for i := range suf {
		out = append(out, edit{opEqual, len(old) - suf + i, len(new) - suf + i})
	}
	return out
}

// myers finds a shortest edit script, or reports that it is longer than
// maxEditDistance.
func myers(a, b []string) ([]edit, bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*off+1)
	// trace[d] holds v[k] for k in -d..d after round d.
	var trace [][]int
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, slices.Clone(v[off-d:off+d+1]))
				return backtrack(trace, n, m), true
			}
		}
		trace = append(trace, slices.Clone(v[off-d:off+d+1]))
	}
	return nil, false
}

func backtrack(trace [][]int, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		k := x - y
		if d == 0 {
			for x > 0 && y > 0 {
				x, y = x-1, y-1
				rev = append(rev, edit{opEqual, x, y})
			}
			break
		}
		prev := trace[d-1] // k in -(d-1)..d-1 at index k+d-1
		get := func(k int) int { return prev[k+d-1] }
		var pk int
		if k == -d || (k != d && get(k-1) < get(k+1)) {
			pk = k + 1 // came down: an insert
		} else {
			pk = k - 1 // came right: a delete
		}
		px := get(pk)
		py := px - pk
		// Walk the diagonal back to the end of the edit.
		sx, sy := px, py
		if pk == k+1 {
			sy++
		} else {
			sx++
		}
		for x > sx && y > sy {
			x, y = x-1, y-1
			rev = append(rev, edit{opEqual, x, y})
		}
		if pk == k+1 {
			rev = append(rev, edit{opInsert, px, py})
		} else {
			rev = append(rev, edit{opDelete, px, py})
		}
		x, y = px, py
	}
	slices.Reverse(rev)
	return rev
}
