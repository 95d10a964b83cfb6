package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// defaultPoll is how often a watch asks again where the API has no stream
// of its own (lists, fabric status, events): often enough to see a job
// move through its states, rare enough to cost the leader nothing.
const defaultPoll = 2 * time.Second

// addWatchFlag adds -w/--watch to a command that prints a list or a status.
func addWatchFlag(cmd *cobra.Command, watch *bool, what string) {
	cmd.Flags().BoolVarP(watch, "watch", "w", false, "after printing, keep watching and print "+what+" as it changes, until Ctrl-C")
}

func (p *printing) pollEvery() time.Duration {
	if p.poll > 0 {
		return p.poll
	}
	return defaultPoll
}

// watchList prints the list, then every item that is new or changed (by
// key; same says two versions of an item differ for a reader, nil: any
// change of its JSON) at each poll until ctx ends. Tables print their
// header once; -o json prints one object per line, -o yaml a document per
// item, -o name a line per item.
func watchList[T any](ctx context.Context, g *globals, fetch func(context.Context) ([]T, error), key func(T) string, same func(a, b T) bool, table func(io.Writer, []T)) error {
	prev := map[string]T{}
	first := true
	for {
		items, err := fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		cur := make(map[string]T, len(items))
		var changed []T
		for _, it := range items {
			k := key(it)
			cur[k] = it
			old, seen := prev[k]
			if !seen || !equalItems(old, it, same) {
				changed = append(changed, it)
			}
		}
		prev = cur
		if first || len(changed) > 0 {
			if err := emitItems(g, changed, first, table); err != nil {
				return err
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends a watch, not an error
		case <-time.After(g.pollEvery()):
		}
	}
}

// watchObject prints v, then v again whenever it changes, until ctx ends.
func watchObject[T any](ctx context.Context, g *globals, fetch func(context.Context) (T, error), table func(io.Writer, T)) error {
	var last []byte
	first := true
	for {
		v, err := fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		if !bytes.Equal(b, last) {
			if !first && !g.isStructured() {
				fmt.Fprintln(g.stdout)
			}
			if err := g.emitItem(v, !g.noHeaders, func(w io.Writer) { table(w, v) }); err != nil {
				return err
			}
			last = b
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(g.pollEvery()):
		}
	}
}

func equalItems[T any](a, b T, same func(a, b T) bool) bool {
	if same != nil {
		return same(a, b)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// isStructured reports whether -o asks for a machine format rather than a
// table.
func (p *printing) isStructured() bool {
	return p.output != "table" && p.output != "wide"
}

// emitItems prints items of a stream: a table (its header only when
// headers is true), else one record per item.
func emitItems[T any](g *globals, items []T, headers bool, table func(io.Writer, []T)) error {
	if !g.isStructured() {
		return g.emitItem(items, headers && !g.noHeaders, func(w io.Writer) { table(w, items) })
	}
	for _, it := range items {
		if err := g.emitItem(it, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// emitItem prints one record of a stream as it comes: a line of JSON, a
// YAML document, its name or JSONPath, or the table (with its header when
// headers is true).
func (g *globals) emitItem(v any, headers bool, table func(w io.Writer)) error {
	if err := g.checkOutput(); err != nil {
		return err
	}
	switch g.output {
	case "json":
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		_, err = fmt.Fprintf(g.stdout, "%s\n", b)
		return err
	case "yaml":
		b, err := orderedYAML(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(g.stdout, "---\n%s", b)
		return err
	case "table", "wide":
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		table(&tableWriter{Writer: tw, wide: g.output == "wide", noHeaders: !headers})
		return tw.Flush()
	}
	return g.emit(v, nil) // name, jsonpath: already a line per record
}
