package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// readSpecFile reads a job spec file (YAML or JSON) as the API's JobSpec
// fields, refusing an unknown field by name. workspace may be written
// TENANT/WORKSPACE, as --workspace takes it.
func readSpecFile(path string) (map[string]any, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("-f %s: cannot read the job spec: %v", path, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, usagef("-f %s: not a YAML or JSON job spec: %v", path, err)
	}
	if m == nil {
		return nil, usagef("-f %s: the job spec is empty", path)
	}
	known := specFields()
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, 0, len(known))
		for k := range known {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, usagef("-f %s: unknown field %s; a job spec has %s", path, strings.Join(quoteAll(unknown), ", "), strings.Join(names, ", "))
	}
	if ws, ok := m["workspace"].(string); ok && strings.Contains(ws, "/") {
		if _, both := m["tenant"]; both {
			return nil, usagef("-f %s: workspace %q names its tenant: leave out tenant", path, ws)
		}
		t, w, err := splitRef("workspace", ws)
		if err != nil {
			return nil, usagef("-f %s: %v", path, describe(nil, err, true))
		}
		m["tenant"], m["workspace"] = t, w
	}
	return m, nil
}

// specFields are the JSON names of JobSpec's fields.
func specFields() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(domain.JobSpec{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// mergeSpec lays the flags the user gave over the file: each changed flag
// replaces the fields it sets (fieldFlags' mapping), the rest come from the
// file. The result is decoded strictly, so a wrong type names its field.
func mergeSpec(cmd *cobra.Command, file map[string]any, flags *domain.JobSpec) (domain.JobSpec, error) {
	b, err := json.Marshal(flags)
	if err != nil {
		return domain.JobSpec{}, fmt.Errorf("encode flags: %w", err)
	}
	var fromFlags map[string]any
	if err := json.Unmarshal(b, &fromFlags); err != nil {
		return domain.JobSpec{}, fmt.Errorf("decode flags: %w", err)
	}
	merged := map[string]any{}
	for k, v := range file {
		merged[k] = v
	}
	for field, flag := range fieldFlags(cmd) {
		if !cmd.Flags().Changed(flag) {
			continue
		}
		if v, ok := fromFlags[field]; ok {
			merged[field] = v
		} else {
			delete(merged, field) // the flag's zero value, left out by omitempty
		}
	}
	if b, err = json.Marshal(merged); err != nil {
		return domain.JobSpec{}, fmt.Errorf("encode job spec: %w", err)
	}
	var spec domain.JobSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return spec, usagef("job spec field %s: %v is not a %s", te.Field, te.Value, te.Type)
		}
		return spec, usagef("job spec: %v", err)
	}
	return spec, nil
}

// waitReady follows job id until it is Ready (or already running or done:
// exit 0), ends without becoming Ready (exitJobEnded), or timeout passes
// (exitTimeout; 0 waits as long as it takes). Each change is printed to
// stderr, so stdout keeps the job as submit prints it.
func (g *globals) waitReady(ctx context.Context, c *client.Client, id uint64, timeout time.Duration) (*domain.Job, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var last *domain.Job
	errReady := errors.New("ready")
	err := c.Watch(ctx, id, func(j *domain.Job) error {
		if last == nil || last.State != j.State {
			fmt.Fprintf(g.stderr, "job %d: %s\n", j.ID, j.State)
		}
		last = j
		switch j.State {
		case domain.JobReady, domain.JobRunning, domain.JobSucceeded:
			return errReady
		}
		return nil
	})
	switch {
	case errors.Is(err, errReady):
		return last, nil
	case err == nil && last != nil: // the watch ends only when the job does
		why := ""
		if last.Reason != nil {
			why = ": " + last.Reason.Message
		} else if last.Message != "" {
			why = ": " + last.Message
		}
		return last, &exitError{code: exitJobEnded, err: fmt.Errorf("job %d ended %s without becoming Ready%s", id, last.State, why)}
	case errors.Is(err, context.DeadlineExceeded) && last != nil:
		why := ""
		if last.Reason != nil {
			why = " (" + last.Reason.Message + ")"
		}
		return last, &exitError{code: exitTimeout, err: fmt.Errorf("job %d is still %s after --timeout %s%s", id, last.State, timeout, why)}
	}
	return last, err
}
