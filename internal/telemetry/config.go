package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config says what to scrape, which push sources to accept, how to map
// series to inventory, and the memory bounds.
type Config struct {
	Targets []Target
	// Push sources accept exposition text on POST /v1/telemetry/push.
	Push []PushSource
	// Rules are the custom rule sets by name (the built-in ones are
	// node-exporter, sonic-exporter and dcgm-exporter).
	Rules  map[string][]Rule
	Limits Limits
}

// Target is one scraped exposition endpoint.
type Target struct {
	Name     string
	URL      string
	Interval time.Duration
	Timeout  time.Duration
	// Device is the inventory device the target's series belong to when no
	// label names one: the leaf for a switch exporter, the server for
	// node_exporter and DCGM.
	Device string
	// RuleSets name the rule sets mapping its series, tried in order.
	RuleSets []string
	// BearerTokenFile, when set, holds the token sent as Authorization.
	BearerTokenFile string
	// Staleness is how long its series stay current without an answer.
	Staleness time.Duration

	rules []*compiledRule
}

// PushSource is a named source of pushed exposition text.
type PushSource struct {
	Name      string
	Device    string
	RuleSets  []string
	Staleness time.Duration

	rules []*compiledRule
}

// Limits bound the store's memory.
type Limits struct {
	// WindowSamples is the ring size per series: rates are over it, and a
	// series missing from this many answers in a row is dropped.
	WindowSamples int
	// MaxSeries bounds the series held; new ones beyond it are dropped,
	// counted and logged.
	MaxSeries int
	// Staleness, when set, is every target's bound; otherwise a target's is
	// 3 scrape intervals, a push source's 30 s.
	Staleness time.Duration
}

// Rule maps exporter series to a signal on an inventory entity.
type Rule struct {
	// Metric is a regular expression matched against the whole metric name;
	// a named group (?P<priority>...) gives the priority, (?P<port>...)
	// the port.
	Metric string
	Signal Signal
	// Counter: the series is a counter (read as a rate); else a gauge.
	Counter bool
	Kind    Kind
	// DeviceLabels name the labels giving the device, first non-empty
	// wins; none given (or all empty): the target's device.
	DeviceLabels []string
	// PortLabels name the labels giving the port, NIC or GPU.
	PortLabels []string
	// PriorityLabel names the label giving the PFC/queue priority.
	PriorityLabel string
	// Match: every label named must match its regular expression (whole).
	Match map[string]string
	// Scale multiplies values (1 when unset).
	Scale float64
	// Invert reads a gauge v as 1-v (an "up" gauge as link_down).
	Invert bool
}

type compiledRule struct {
	Rule
	set     string
	index   int
	re      *regexp.Regexp
	prioIdx int // capture group giving the priority, -1 if none
	portIdx int
	match   []labelMatch
}

type labelMatch struct {
	name string
	re   *regexp.Regexp
}

// Defaults.
const (
	DefaultWindowSamples = 10
	DefaultMaxSeries     = 500_000
	defaultPushStaleness = 30 * time.Second
)

// yaml shapes: strings for durations so an error names the field.
type rawConfig struct {
	Targets []rawTarget          `yaml:"targets"`
	Push    []rawPush            `yaml:"push"`
	Rules   map[string][]rawRule `yaml:"rules"`
	Limits  rawLimits            `yaml:"limits"`
}

type rawTarget struct {
	Name            string   `yaml:"name"`
	URL             string   `yaml:"url"`
	Interval        string   `yaml:"interval"`
	Timeout         string   `yaml:"timeout"`
	Device          string   `yaml:"device"`
	Rules           strOrSeq `yaml:"rules"`
	BearerTokenFile string   `yaml:"bearer_token_file"`
	Staleness       string   `yaml:"staleness"`
}

type rawPush struct {
	Name      string   `yaml:"name"`
	Device    string   `yaml:"device"`
	Rules     strOrSeq `yaml:"rules"`
	Staleness string   `yaml:"staleness"`
}

type rawRule struct {
	Metric        string            `yaml:"metric"`
	Signal        string            `yaml:"signal"`
	Type          string            `yaml:"type"`
	Kind          string            `yaml:"kind"`
	DeviceLabel   strOrSeq          `yaml:"device_label"`
	PortLabel     strOrSeq          `yaml:"port_label"`
	PriorityLabel string            `yaml:"priority_label"`
	Match         map[string]string `yaml:"match"`
	Scale         *float64          `yaml:"scale"`
	Invert        bool              `yaml:"invert"`
}

type rawLimits struct {
	WindowSamples *int   `yaml:"window_samples"`
	MaxSeries     *int   `yaml:"max_series"`
	Staleness     string `yaml:"staleness"`
}

// strOrSeq takes "a" or [a, b].
type strOrSeq []string

func (s *strOrSeq) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = []string{n.Value}
		return nil
	}
	var v []string
	if err := n.Decode(&v); err != nil {
		return err
	}
	*s = v
	return nil
}

// ConfigError names the field, the value and the rule it breaks.
type ConfigError struct {
	Field, Value, Rule string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("telemetry config: %s: %q %s", e.Field, e.Value, e.Rule)
}

func cfgErr(field, value, rule string, a ...any) error {
	return &ConfigError{Field: field, Value: value, Rule: fmt.Sprintf(rule, a...)}
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$`)

// ParseConfig reads and checks a YAML telemetry configuration. An empty
// document is a valid config with no targets.
func ParseConfig(b []byte) (Config, error) {
	var raw rawConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("telemetry config: %w", err)
	}
	var cfg Config
	var err error

	// Limits.
	cfg.Limits.WindowSamples = DefaultWindowSamples
	if w := raw.Limits.WindowSamples; w != nil {
		if *w < 2 || *w > 1024 {
			return Config{}, cfgErr("limits.window_samples", fmt.Sprint(*w), "must be 2 to 1024 (a rate needs two samples)")
		}
		cfg.Limits.WindowSamples = *w
	}
	cfg.Limits.MaxSeries = DefaultMaxSeries
	if m := raw.Limits.MaxSeries; m != nil {
		if *m < 1 || *m > 50_000_000 {
			return Config{}, cfgErr("limits.max_series", fmt.Sprint(*m), "must be 1 to 50000000")
		}
		cfg.Limits.MaxSeries = *m
	}
	if cfg.Limits.Staleness, err = parseDur("limits.staleness", raw.Limits.Staleness, 0); err != nil {
		return Config{}, err
	}

	// Custom rules, compiled once; built-ins may not be redefined.
	cfg.Rules = map[string][]Rule{}
	compiled := map[string][]*compiledRule{}
	for name, rs := range builtinSets {
		compiled[name] = mustCompile(name, rs)
	}
	setNames := make([]string, 0, len(raw.Rules))
	for name := range raw.Rules {
		setNames = append(setNames, name)
	}
	slices.Sort(setNames)
	for _, name := range setNames {
		f := "rules." + name
		if !namePattern.MatchString(name) {
			return Config{}, cfgErr(f, name, "is not a rule set name (letters, digits, _.:-; up to 63)")
		}
		if _, ok := builtinSets[name]; ok {
			return Config{}, cfgErr(f, name, "is a built-in rule set; choose another name")
		}
		if len(raw.Rules[name]) == 0 {
			return Config{}, cfgErr(f, name, "has no rules")
		}
		var rules []Rule
		for i, rr := range raw.Rules[name] {
			r, err := rr.rule(fmt.Sprintf("%s[%d]", f, i))
			if err != nil {
				return Config{}, err
			}
			rules = append(rules, r)
		}
		cr, err := compileRules(name, rules)
		if err != nil {
			return Config{}, err
		}
		cfg.Rules[name] = rules
		compiled[name] = cr
	}
	resolve := func(field string, sets []string) ([]*compiledRule, error) {
		if len(sets) == 0 {
			return nil, cfgErr(field, "", "is required: a built-in rule set (%s) or one under rules", strings.Join(BuiltinRuleSets(), ", "))
		}
		var out []*compiledRule
		for _, s := range sets {
			cr, ok := compiled[s]
			if !ok {
				return nil, cfgErr(field, s, "names no rule set: built-in are %s; custom ones go under rules", strings.Join(BuiltinRuleSets(), ", "))
			}
			out = append(out, cr...)
		}
		return out, nil
	}

	names := map[string]string{}
	for i, rt := range raw.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		if !namePattern.MatchString(rt.Name) {
			return Config{}, cfgErr(f+".name", rt.Name, "is not a target name (letters, digits, _.:-; up to 63)")
		}
		if prev, dup := names[rt.Name]; dup {
			return Config{}, cfgErr(f+".name", rt.Name, "is already the name of %s", prev)
		}
		names[rt.Name] = f
		u, err := url.Parse(rt.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, cfgErr(f+".url", rt.URL, "must be an http or https URL with a host")
		}
		t := Target{Name: rt.Name, URL: rt.URL, Device: rt.Device, RuleSets: rt.Rules, BearerTokenFile: rt.BearerTokenFile}
		if t.Interval, err = parseDur(f+".interval", rt.Interval, 15*time.Second); err != nil {
			return Config{}, err
		}
		if t.Interval < 100*time.Millisecond || t.Interval > time.Hour {
			return Config{}, cfgErr(f+".interval", rt.Interval, "must be 100ms to 1h")
		}
		if t.Timeout, err = parseDur(f+".timeout", rt.Timeout, min(t.Interval, 10*time.Second)); err != nil {
			return Config{}, err
		}
		if t.Timeout <= 0 || t.Timeout > t.Interval {
			return Config{}, cfgErr(f+".timeout", rt.Timeout, "must be positive and at most the interval (%s)", t.Interval)
		}
		if t.Staleness, err = parseDur(f+".staleness", rt.Staleness, cfg.Limits.Staleness); err != nil {
			return Config{}, err
		}
		if t.Staleness == 0 {
			t.Staleness = 3 * t.Interval
		}
		if t.Staleness < t.Interval {
			return Config{}, cfgErr(f+".staleness", t.Staleness.String(), "must be at least the interval (%s): every series would go stale between scrapes", t.Interval)
		}
		if t.rules, err = resolve(f+".rules", rt.Rules); err != nil {
			return Config{}, err
		}
		cfg.Targets = append(cfg.Targets, t)
	}
	for i, rp := range raw.Push {
		f := fmt.Sprintf("push[%d]", i)
		if !namePattern.MatchString(rp.Name) {
			return Config{}, cfgErr(f+".name", rp.Name, "is not a push source name (letters, digits, _.:-; up to 63)")
		}
		if prev, dup := names[rp.Name]; dup {
			return Config{}, cfgErr(f+".name", rp.Name, "is already the name of %s", prev)
		}
		names[rp.Name] = f
		p := PushSource{Name: rp.Name, Device: rp.Device, RuleSets: rp.Rules}
		if p.Staleness, err = parseDur(f+".staleness", rp.Staleness, cfg.Limits.Staleness); err != nil {
			return Config{}, err
		}
		if p.Staleness == 0 {
			p.Staleness = defaultPushStaleness
		}
		if p.rules, err = resolve(f+".rules", rp.Rules); err != nil {
			return Config{}, err
		}
		cfg.Push = append(cfg.Push, p)
	}
	return cfg, nil
}

func parseDur(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, cfgErr(field, s, "is not a duration (e.g. 1s, 500ms)")
	}
	return d, nil
}

func (rr rawRule) rule(f string) (Rule, error) {
	r := Rule{Metric: rr.Metric, Signal: Signal(rr.Signal), Kind: Kind(rr.Kind),
		DeviceLabels: rr.DeviceLabel, PortLabels: rr.PortLabel, PriorityLabel: rr.PriorityLabel,
		Match: rr.Match, Scale: 1, Invert: rr.Invert}
	switch rr.Type {
	case "counter":
		r.Counter = true
	case "gauge":
	default:
		return Rule{}, cfgErr(f+".type", rr.Type, "must be counter or gauge")
	}
	if rr.Scale != nil {
		r.Scale = *rr.Scale
	}
	return r, checkRule(f, r)
}

func checkRule(f string, r Rule) error {
	if r.Metric == "" {
		return cfgErr(f+".metric", "", "is required: a regular expression matching whole metric names")
	}
	if _, err := regexp.Compile(r.Metric); err != nil {
		return cfgErr(f+".metric", r.Metric, "is not a regular expression (%v)", err)
	}
	if !slices.Contains(Signals(), r.Signal) {
		return cfgErr(f+".signal", string(r.Signal), "is not a signal; known: %s", joinSignals())
	}
	switch r.Kind {
	case KindPort, KindNIC, KindGPU:
	default:
		return cfgErr(f+".kind", string(r.Kind), "must be port, nic or gpu")
	}
	if math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0) || r.Scale == 0 {
		return cfgErr(f+".scale", fmt.Sprint(r.Scale), "must be a finite, non-zero number")
	}
	if r.Invert && r.Counter {
		return cfgErr(f+".invert", "true", "applies to gauges only")
	}
	for l, m := range r.Match {
		if _, err := regexp.Compile(m); err != nil {
			return cfgErr(f+".match."+l, m, "is not a regular expression (%v)", err)
		}
	}
	re := regexp.MustCompile(r.Metric)
	if len(r.PortLabels) == 0 && re.SubexpIndex("port") < 0 {
		return cfgErr(f+".port_label", "", "is required (or a (?P<port>...) group in metric): which label names the port, NIC or GPU")
	}
	return nil
}

func compileRules(set string, rules []Rule) ([]*compiledRule, error) {
	var out []*compiledRule
	for i, r := range rules {
		if err := checkRule(fmt.Sprintf("rules.%s[%d]", set, i), r); err != nil {
			return nil, err
		}
		c := &compiledRule{Rule: r, set: set, index: i, re: regexp.MustCompile("^(?:" + r.Metric + ")$")}
		c.prioIdx = c.re.SubexpIndex("priority")
		c.portIdx = c.re.SubexpIndex("port")
		labels := make([]string, 0, len(r.Match))
		for l := range r.Match {
			labels = append(labels, l)
		}
		slices.Sort(labels)
		for _, l := range labels {
			c.match = append(c.match, labelMatch{name: l, re: regexp.MustCompile("^(?:" + r.Match[l] + ")$")})
		}
		out = append(out, c)
	}
	return out, nil
}

func mustCompile(set string, rules []Rule) []*compiledRule {
	c, err := compileRules(set, rules)
	if err != nil {
		panic(err) // the built-in sets are tested
	}
	return c
}

// Signals lists the known signals.
func Signals() []Signal {
	return []Signal{PFCPauseRx, PFCPauseTx, PFCStorm, ECNMarked, CNPSent, CNPHandled, Drops, CRCErrors,
		FECUncorrected, LinkFlaps, LinkDown, OpticsRxPower, OpticsTemp, RxBytes, TxBytes,
		GPUXid, GPUNVLinkErr, GPUECCErr, GPUThrottle}
}

func joinSignals() string {
	var s []string
	for _, x := range Signals() {
		s = append(s, string(x))
	}
	return strings.Join(s, ", ")
}
