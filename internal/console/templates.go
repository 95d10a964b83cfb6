package console

import (
	"fmt"
	"html/template"
	"time"
)

var funcs = template.FuncMap{
	// when prints a time for people, in UTC.
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"whenp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"gpus": func(x float64) string { return fmt.Sprintf("%.4g", x) },
	"add":  func(a, b int) int { return a + b },
	"f1":   func(x float64) string { return fmt.Sprintf("%.1f", x) },
}
