package cli

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Exit statuses, documented in docs/operations.md ("CLI exit codes"):
// scripts branch on the kind of failure without parsing messages.
const (
	exitOK       = 0
	exitFailure  = 1 // refused by the rules: a conflict, a quota, a precondition
	exitUsage    = 2 // the command line is wrong: unknown command or flag, bad value
	exitNotFound = 3 // the object does not exist (or belongs to another tenant)
	exitDenied   = 4 // no token, a bad or expired token, or not allowed
	exitServer   = 5 // the server could not be reached or failed
	exitJobEnded = 6 // job submit --wait: the job ended without becoming Ready
	exitTimeout  = 7 // job submit --wait --timeout: the job is not Ready yet
)

// fieldAnnotation on a flag lists the API fields it sets when they are not
// simply its name in camelCase (--time-limit sets timeLimitSeconds).
const fieldAnnotation = "jobfabric.io/fields"

// exitError carries an exit status chosen by the CLI itself.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a mistake in the command line.
func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, err: err}
}

// usagef is usageErr of a formatted message.
func usagef(format string, args ...any) error {
	return usageErr(fmt.Errorf(format, args...))
}

// exitCode maps an error to the process exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isCobraUsage(err) {
		return exitUsage
	}
	var de *domain.Error
	if !errors.As(err, &de) {
		return exitFailure
	}
	switch de.Code {
	case domain.CodeInvalidArgument, domain.CodeUnsupportedMediaType, domain.CodePayloadTooLarge:
		return exitUsage
	case domain.CodeNotFound:
		return exitNotFound
	case domain.CodeUnauthenticated, domain.CodePermissionDenied, domain.CodeTokenExpired, domain.CodeRateLimited:
		return exitDenied
	case domain.CodeUnavailable, domain.CodeInternal:
		return exitServer
	}
	return exitFailure
}

// isCobraUsage recognizes the command-line errors cobra makes itself and
// returns untyped.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag(s)", "if any flags in the group", "at least one of the flags", "accepts ", "requires at least", "flag needs an argument", "invalid argument"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// markUsage makes every argument-count error of the tree a usage error and
// gives each command group a RunE that refuses an unknown subcommand with
// cobra's suggestions (a group without one prints its help and exits 0).
func markUsage(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	} else if c.Args != nil {
		validate := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error { return usageErr(validate(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		markUsage(sub)
	}
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	msg += fmt.Sprintf("\n\nRun '%s --help' for the commands.", cmd.CommandPath())
	return usageErr(errors.New(msg))
}

// describe renders an error for a person in the terms of the command that
// failed: an API field becomes the flag that sets it (gpusPerNode ->
// --gpus-per-node), "must not be empty" becomes "is required", and every
// detail of a multi-problem error follows on its own line.
func describe(cmd *cobra.Command, err error, tokenGiven bool) string {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err.Error()
	}
	flags := fieldFlags(cmd)
	s := inFlagTerms(de.Field, de.Message, flags)
	if flag, ok := flags[de.Field]; de.Field != "" && !ok {
		s += " [field " + de.Field + "]"
	} else if ok && !strings.Contains(s, "--"+flag) {
		s = "--" + flag + ": " + s
	}
	for _, d := range de.Details {
		s += "\n  - "
		if flag, ok := flags[d.Field]; ok {
			s += "--" + flag + ": "
		} else if d.Field != "" {
			s += d.Field + ": "
		}
		s += inFlagTerms(d.Field, d.Message, flags)
		if d.Rule != "" {
			s += " [rule " + d.Rule + "]"
		}
	}
	// The code adds nothing to "not found" or a named flag's rule.
	if de.Code != domain.CodeNotFound && de.Code != domain.CodeInvalidArgument {
		s += " (" + string(de.Code) + ")"
	}
	if de.Code == domain.CodeUnauthenticated && !tokenGiven {
		s += "\n" + tokenHelp
	}
	return s
}

// tokenHelp says where a token comes from, in the order they win.
const tokenHelp = `no token was given; a token comes from (first wins):
  --token TOKEN
  the JOBFABRIC_TOKEN environment variable
  the token file of the current context (jobfabric config set-context NAME --token-file FILE)
  on a server's host, the admin token the server wrote to DATA_DIR/admin.token`

var emptyRule = regexp.MustCompile(`^(\S+) must not be empty$`)

// inFlagTerms rewrites msg: the field it is about, and every camelCase API
// field a flag of the command sets, are named as flags.
func inFlagTerms(field, msg string, flags map[string]string) string {
	if m := emptyRule.FindStringSubmatch(msg); m != nil {
		if flag, ok := flags[m[1]]; ok {
			return "--" + flag + " is required"
		}
	}
	names := make([]string, 0, len(flags))
	for f := range flags {
		names = append(names, f)
	}
	// Longest first: gpusPerNode before gpus.
	sort.Slice(names, func(i, j int) bool {
		return len(names[i]) > len(names[j]) || (len(names[i]) == len(names[j]) && names[i] < names[j])
	})
	for _, f := range names {
		// A plain word ("name", "share") is a field only when it is the
		// error's own, or is followed by a value: "gpus 12 is not ...".
		after := `($|[^\w.])`
		if f != field && strings.IndexFunc(f, unicode.IsUpper) < 0 && !strings.Contains(f, ".") {
			after = `( -?[\d"])`
		}
		re := regexp.MustCompile(`(^|[^\w.-])` + regexp.QuoteMeta(f) + after)
		msg = re.ReplaceAllString(msg, "${1}--"+flags[f]+"${2}")
	}
	return msg
}

// fieldFlags maps the API fields the command's flags set to the flags'
// names: a flag's name in camelCase, and the fields of its annotation.
func fieldFlags(cmd *cobra.Command) map[string]string {
	m := map[string]string{}
	if cmd == nil {
		return m
	}
	add := func(f *pflag.Flag) {
		// The CLI's own checks name the flag itself (model-quota).
		for _, field := range []string{camel(f.Name), f.Name} {
			if _, taken := m[field]; !taken {
				m[field] = f.Name
			}
		}
		for _, field := range f.Annotations[fieldAnnotation] {
			if _, taken := m[field]; !taken {
				m[field] = f.Name
			}
		}
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return m
}

// camel turns a flag name into the API's spelling: gpus-per-node -> gpusPerNode.
func camel(s string) string {
	parts := strings.Split(s, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// setsFields annotates flag name of cmd as setting the API fields.
func setsFields(cmd *cobra.Command, name string, fields ...string) {
	_ = cmd.Flags().SetAnnotation(name, fieldAnnotation, fields)
}
