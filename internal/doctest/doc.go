// Package doctest runs the commands the README and docs/*.md show, in order,
// against a fresh real server, so that a docs change that breaks them fails
// the tests. It owns the conventions a page uses to say what runs and what
// the output must show:
//
//   - The README's "A 5-minute tour" section runs whole: every fenced block
//     in it with no info string (or sh, bash, shell). Elsewhere, and in
//     docs/*.md, a block runs only when the line before its fence (blank
//     lines aside) is the HTML comment <!-- runnable -->, which no rendered
//     page shows. <!-- runnable: root --> marks a block that needs root and
//     the lab's tools (docs/lab.md): without them the page is skipped, with
//     the reason, since its later blocks build on it.
//   - One command per line; a line ending in \ continues on the next. A
//     command that must fail is written as bash says it: ! cmd.
//   - A comment line "# => TEXT" under a command is a line its output
//     (stdout, then stderr) must show, in the order given; runs of spaces
//     match any run of spaces, so table columns may move. "# => /RE/" is a
//     regular expression (RE2) instead. "# ~> TEXT" says the same of the
//     output once the server has acted (a job placed, a fabric deployed):
//     the command is run again, for up to 15 s, until every expectation
//     holds. Use it only on commands that change nothing.
//   - A command ending in & runs in the background; the runner waits for its
//     first line of output (a server prints its address once it serves),
//     checks its expectations when the page ends, then stops it. Its
//     expectations count as ~>: it is still running.
//
// Each page runs in a fresh bash session: a scratch copy of the checkout's
// top level (symlinks) as working directory, bin/jobfabric and jobfabric on
// PATH the binary the test built, HOME, /tmp/ and the lab directory
// (JOBFABRIC_LAB_DIR) private to the session, no JOBFABRIC_* variable from
// outside. Only what must change is rewritten: `go build` lines are not run
// (the test built the binary), /tmp/ and /run/jobfabric-lab paths move into
// the session, every loopback port (127.0.0.1:N, localhost:N, and the CLI's
// default server 127.0.0.1:7070) is mapped to a free one, a `jobfabric
// server` without --listen gets the mapped default port, and, as root, sudo
// is dropped. A lab the page leaves up is taken down.
package doctest
