package doctest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Block is a fenced shell block of a page that runs.
type Block struct {
	Line     int  // line of the opening fence
	Root     bool // marked <!-- runnable: root -->
	Commands []Command
}

// Command is one command line of a block and what its output must show.
type Command struct {
	Line   int    // first line in the page
	Text   string // as written; continuation lines joined with their newline
	Expect []Expectation
	// Eventually: run again until every expectation holds (# ~>).
	Eventually bool
}

// Expectation is a line the output must show: text whose spaces match any
// run of spaces, or a regular expression.
type Expectation struct {
	Line int
	Text string
	Re   *regexp.Regexp
}

// Match says whether an output line (spaces already collapsed) shows it.
func (e Expectation) Match(line string) bool {
	if e.Re != nil {
		return e.Re.MatchString(line)
	}
	return strings.Contains(line, e.Text)
}

func (e Expectation) String() string {
	if e.Re != nil {
		return "/" + e.Re.String() + "/"
	}
	return e.Text
}

var (
	markerRe = regexp.MustCompile(`^<!--\s*runnable(?:\s*:\s*(\S+))?\s*-->$`)
	spaceRe  = regexp.MustCompile(`[ \t]+`)
)

// collapse trims a line and turns each run of spaces and tabs into one space.
func collapse(s string) string { return spaceRe.ReplaceAllString(strings.TrimSpace(s), " ") }

func shellInfo(info string) bool {
	switch info {
	case "", "sh", "bash", "shell":
		return true
	}
	return false
}

// Extract returns the blocks of a page that run: those marked runnable and,
// when section is not empty, every shell block under the level-2 heading
// "## section". It is an error for that section to be missing or to hold no
// command, for a marked block not to be shell, and for an expectation to
// follow no command.
func Extract(src []byte, section string) ([]Block, error) {
	var (
		blocks    []Block
		inSection bool
		found     bool
		marker    string // "" none, "runnable", "root"
		prev      string // previous non-blank line outside fences
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(line, "## ") {
			inSection = section != "" && strings.TrimSpace(line[3:]) == section
			found = found || inSection
		}
		fence, info, ok := openFence(trimmed)
		if !ok {
			if trimmed != "" {
				prev = trimmed
			}
			continue
		}
		marker = ""
		if m := markerRe.FindStringSubmatch(prev); m != nil {
			marker = "runnable"
			switch m[1] {
			case "":
			case "root":
				marker = "root"
			default:
				return nil, fmt.Errorf("line %d: unknown marker %q (want <!-- runnable --> or <!-- runnable: root -->)", n-1, prev)
			}
		}
		start := n
		var body []string
		closed := false
		for sc.Scan() {
			n++
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, fence) && strings.Trim(l, fence[:1]) == "" {
				closed = true
				break
			}
			body = append(body, sc.Text())
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the fenced block is never closed", start)
		}
		prev = ""
		run := marker != "" || (inSection && shellInfo(info))
		if !run {
			continue
		}
		if !shellInfo(info) {
			return nil, fmt.Errorf("line %d: a runnable block must be shell (```, ```sh, ```bash), not %q", start, info)
		}
		b, err := parseBlock(body, start+1)
		if err != nil {
			return nil, err
		}
		b.Line, b.Root = start, marker == "root"
		blocks = append(blocks, b)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if section != "" {
		if !found {
			return nil, fmt.Errorf("no section %q", "## "+section)
		}
		cmds := 0
		for _, b := range blocks {
			cmds += len(b.Commands)
		}
		if cmds == 0 {
			return nil, fmt.Errorf("section %q holds no command", "## "+section)
		}
	}
	return blocks, nil
}

// openFence recognises an opening code fence (``` or ~~~, three or more)
// and returns the fence and its info string.
func openFence(trimmed string) (fence, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			i := 0
			for i < len(trimmed) && trimmed[i] == c[0] {
				i++
			}
			return trimmed[:i], strings.TrimSpace(trimmed[i:]), true
		}
	}
	return "", "", false
}

// parseBlock splits a block body into commands and their expectations.
func parseBlock(body []string, first int) (Block, error) {
	var b Block
	for i := 0; i < len(body); i++ {
		ln := first + i
		t := strings.TrimSpace(body[i])
		switch {
		case t == "":
			continue
		case strings.HasPrefix(t, "# =>") || strings.HasPrefix(t, "# ~>"):
			if len(b.Commands) == 0 {
				return b, fmt.Errorf("line %d: %q follows no command", ln, t)
			}
			e, err := parseExpectation(strings.TrimSpace(t[4:]), ln)
			if err != nil {
				return b, err
			}
			c := &b.Commands[len(b.Commands)-1]
			c.Expect = append(c.Expect, e)
			c.Eventually = c.Eventually || strings.HasPrefix(t, "# ~>")
			continue
		case strings.HasPrefix(t, "#"):
			continue // a comment, as in bash
		}
		text := body[i]
		for strings.HasSuffix(strings.TrimRight(text, " \t"), `\`) && i+1 < len(body) {
			i++
			text += "\n" + body[i]
		}
		b.Commands = append(b.Commands, Command{Line: ln, Text: strings.TrimSpace(text)})
	}
	return b, nil
}

func parseExpectation(s string, line int) (Expectation, error) {
	if s == "" {
		return Expectation{}, fmt.Errorf("line %d: an empty expectation", line)
	}
	if len(s) >= 2 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/") {
		re, err := regexp.Compile(s[1 : len(s)-1])
		if err != nil {
			return Expectation{}, fmt.Errorf("line %d: expectation %s: %w", line, s, err)
		}
		return Expectation{Line: line, Re: re}, nil
	}
	return Expectation{Line: line, Text: collapse(s)}, nil
}

// Missing returns the expectations the output does not show, in order: each
// must match the line the previous one matched or a later one.
func Missing(expect []Expectation, output string) []Expectation {
	lines := strings.Split(output, "\n")
	for i := range lines {
		lines[i] = collapse(lines[i])
	}
	var missing []Expectation
	at := 0
	for _, e := range expect {
		j := at
		for j < len(lines) && !e.Match(lines[j]) {
			j++
		}
		if j == len(lines) {
			missing = append(missing, e)
			continue
		}
		at = j
	}
	return missing
}
