package telemetry

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Store holds a bounded window of samples per mapped series and answers
// readings from it. It is safe for concurrent use.
type Store struct {
	cfg     Config
	clock   tstime.Clock
	log     *slog.Logger
	changed chan struct{}
	push    map[string]*PushSource

	mu      sync.RWMutex
	sources map[string]*source
	byKey   map[Key][]*series
	nseries int
	// dropped counts series refused by the cardinality limit; the log
	// says what, at most once per dropLogEvery.
	dropped      uint64
	droppedLog   int // drops not logged since the last line
	lastDropLog  time.Time
	lastDropWhat string
}

const dropLogEvery = time.Minute

// maxFamilyCache bounds the per-source cache of metric names to rules: a
// source inventing names cannot grow it without bound.
const maxFamilyCache = 4096

// source is a scrape target or a push source (per device).
type source struct {
	name      string // Reading.Target
	device    string // default device
	pin       bool   // every series must be on device (a node agent's push)
	rules     []*compiledRule
	staleness time.Duration
	lastOK    time.Time
	lastErr   error
	gen       uint64
	series    map[string]*series
	families  map[string][]famRule
	strs      map[string]string // intern
}

// famRule is a rule whose metric pattern matches a family name, with what
// the name's groups gave.
type famRule struct {
	r    *compiledRule
	prio int
	port string
}

type sample struct {
	t int64 // unix nanoseconds
	v float64
}

type series struct {
	src      *source
	metric   string
	key      Key
	signal   Signal
	prio     int
	counter  bool
	invert   bool
	scale    float64
	seen     uint64
	missing  int
	n, head  int // samples held; next slot
	ring     []sample
	keyIndex int // position in byKey[key]
}

// NewStore builds a store for cfg (from ParseConfig). log may be nil.
func NewStore(cfg Config, clock tstime.Clock, log *slog.Logger) (*Store, error) {
	if clock == nil {
		clock = tstime.Std{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits.WindowSamples == 0 {
		cfg.Limits.WindowSamples = DefaultWindowSamples
	}
	if cfg.Limits.MaxSeries == 0 {
		cfg.Limits.MaxSeries = DefaultMaxSeries
	}
	if cfg.Limits.WindowSamples < 2 {
		return nil, cfgErr("limits.window_samples", fmt.Sprint(cfg.Limits.WindowSamples), "must be at least 2")
	}
	s := &Store{cfg: cfg, clock: clock, log: log, changed: make(chan struct{}, 1),
		push: map[string]*PushSource{}, sources: map[string]*source{}, byKey: map[Key][]*series{}}
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.rules == nil {
			return nil, cfgErr(fmt.Sprintf("targets[%d]", i), t.Name, "was not built by ParseConfig")
		}
		s.sources[t.Name] = newSource(t.Name, t.Device, t.rules, t.Staleness)
	}
	for i := range cfg.Push {
		p := &cfg.Push[i]
		if p.rules == nil {
			return nil, cfgErr(fmt.Sprintf("push[%d]", i), p.Name, "was not built by ParseConfig")
		}
		s.push[p.Name] = p
	}
	return s, nil
}

func newSource(name, device string, rules []*compiledRule, stale time.Duration) *source {
	return &source{name: name, device: device, rules: rules, staleness: stale,
		series: map[string]*series{}, families: map[string][]famRule{}, strs: map[string]string{}}
}

// Changed is signalled after an ingest changed the store; signals
// coalesce (one pending at most).
func (s *Store) Changed() <-chan struct{} { return s.changed }

func (s *Store) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Format of a body by its Content-Type: the Prometheus text format when
// unset or unknown, else protobuf or OpenMetrics as declared.
func formatOf(contentType string) expfmt.Format {
	if contentType == "" {
		return expfmt.FmtText
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return expfmt.FmtUnknown
	}
	h := make(map[string][]string, 1)
	h["Content-Type"] = []string{contentType}
	f := expfmt.ResponseFormat(h)
	if f == expfmt.FmtUnknown && mt == "text/plain" {
		return expfmt.FmtText
	}
	return f
}

// CheckContentType refuses a Content-Type that is no exposition format
// expfmt decodes (before a body is read).
func CheckContentType(contentType string) error {
	if formatOf(contentType) == expfmt.FmtUnknown {
		return &domain.Error{Code: domain.CodeUnsupportedMediaType, Field: "Content-Type",
			Message: fmt.Sprintf("Content-Type %q is not an exposition format: send text/plain; version=0.0.4, application/openmetrics-text or delimited protobuf", contentType)}
	}
	return nil
}

// decode parses a whole exposition with expfmt.
func decode(body io.Reader, contentType string) ([]*dto.MetricFamily, error) {
	if err := CheckContentType(contentType); err != nil {
		return nil, err
	}
	f := formatOf(contentType)
	dec := expfmt.NewDecoder(body, f)
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, domain.Invalid("body", "not a Prometheus exposition (%s): %v", f, err)
		}
		out = append(out, mf)
	}
}

// IngestResult counts what one answer or push brought.
type IngestResult struct {
	// Accepted samples were mapped and stored.
	Accepted int `json:"accepted"`
	// Ignored samples matched no rule (or were histograms/summaries).
	Ignored int `json:"ignored"`
	// Dropped samples were refused: a new series beyond the cardinality
	// limit, or a device a pinned push may not speak for.
	Dropped int `json:"dropped"`
}

// ingest applies parsed families as one answer of src at time at.
func (s *Store) ingest(src *source, fams []*dto.MetricFamily, at time.Time) IngestResult {
	var res IngestResult
	var id []byte
	now := at.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	src.gen++
	src.lastOK, src.lastErr = at, nil
	for _, mf := range fams {
		name := mf.GetName()
		cands := src.candidates(name)
		if len(cands) == 0 {
			res.Ignored += len(mf.Metric)
			continue
		}
		for _, m := range mf.Metric {
			v, ok := valueOf(mf.GetType(), m)
			// NaN (Prometheus' staleness marker) and infinities carry no
			// count: a counter's increase over them would be NaN.
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				res.Ignored++
				continue
			}
			id = seriesID(id[:0], name, m.Label)
			se := src.series[string(id)]
			if se == nil {
				var drop bool
				se, drop = s.newSeries(src, name, string(id), cands, m.Label)
				if se == nil {
					if drop {
						res.Dropped++
					} else {
						res.Ignored++
					}
					continue
				}
			}
			se.add(now, v)
			se.seen, se.missing = src.gen, 0
			res.Accepted++
		}
	}
	// A series this answer lacks is stale; after a window of answers
	// without it, it goes.
	for id, se := range src.series {
		if se.seen == src.gen {
			continue
		}
		se.missing++
		if se.missing >= s.cfg.Limits.WindowSamples {
			s.removeSeries(se)
			delete(src.series, id)
		}
	}
	s.notify()
	return res
}

func (src *source) candidates(name string) []famRule {
	if c, ok := src.families[name]; ok {
		return c
	}
	var out []famRule
	for _, r := range src.rules {
		m := r.re.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		fr := famRule{r: r, prio: -1}
		if r.prioIdx >= 0 {
			if p, err := strconv.Atoi(m[r.prioIdx]); err == nil {
				fr.prio = p
			}
		}
		if r.portIdx >= 0 {
			fr.port = m[r.portIdx]
		}
		out = append(out, fr)
	}
	if len(src.families) >= maxFamilyCache {
		clear(src.families)
	}
	src.families[name] = out
	return out
}

// intern returns one copy of a string per source: a leaf's series share
// its device, metric names and ports, and a copy holds no decoder's buffer
// alive. The table is bounded like the family cache.
func (src *source) intern(v string) string {
	if c, ok := src.strs[v]; ok {
		return c
	}
	if len(src.strs) >= maxInterned {
		clear(src.strs)
	}
	c := strings.Clone(v)
	src.strs[c] = c
	return c
}

const maxInterned = 1 << 16

func valueOf(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

// seriesID is the metric name and its labels as the exporter ordered them
// (stable for one exporter), separated by bytes labels cannot hold.
func seriesID(b []byte, name string, labels []*dto.LabelPair) []byte {
	b = append(b, name...)
	for _, l := range labels {
		b = append(b, 0xff)
		b = append(b, l.GetName()...)
		b = append(b, 0xfe)
		b = append(b, l.GetValue()...)
	}
	return b
}

func label(labels []*dto.LabelPair, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// newSeries maps a first-seen series by the first rule that takes it and
// admits it under the cardinality limit. nil, false: no rule maps it;
// nil, true: it was refused.
func (s *Store) newSeries(src *source, name, id string, cands []famRule, labels []*dto.LabelPair) (*series, bool) {
	for _, c := range cands {
		r := c.r
		ok := true
		for _, lm := range r.match {
			if !lm.re.MatchString(label(labels, lm.name)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		k := Key{Kind: r.Kind, Port: c.port}
		for _, l := range r.DeviceLabels {
			if k.Device = label(labels, l); k.Device != "" {
				break
			}
		}
		if k.Device == "" {
			k.Device = src.device
		}
		if k.Port == "" {
			for _, l := range r.PortLabels {
				if k.Port = label(labels, l); k.Port != "" {
					break
				}
			}
		}
		if k.Device == "" || k.Port == "" {
			continue
		}
		if src.pin && k.Device != src.device {
			s.dropLog(src, name, id, fmt.Sprintf("device %q is not the pushing node %q", k.Device, src.device))
			return nil, true
		}
		prio := c.prio
		if r.PriorityLabel != "" {
			if p, err := strconv.Atoi(label(labels, r.PriorityLabel)); err == nil {
				prio = p
			}
		}
		if s.nseries >= s.cfg.Limits.MaxSeries {
			s.dropped++
			s.dropLog(src, name, id, fmt.Sprintf("cardinality limit: %d series held (limits.max_series)", s.nseries))
			return nil, true
		}
		k.Device, k.Port = src.intern(k.Device), src.intern(k.Port)
		se := &series{src: src, metric: src.intern(name), key: k, signal: r.Signal, prio: prio, counter: r.Counter,
			invert: r.Invert, scale: r.Scale, ring: make([]sample, s.cfg.Limits.WindowSamples)}
		src.series[id] = se
		se.keyIndex = len(s.byKey[k])
		s.byKey[k] = append(s.byKey[k], se)
		s.nseries++
		return se, false
	}
	return nil, false
}

// dropLog says what was dropped, at most once per dropLogEvery, with the
// count dropped since the last line. s.mu is held.
func (s *Store) dropLog(src *source, name, id, why string) {
	now := s.clock.Now()
	if !s.lastDropLog.IsZero() && now.Sub(s.lastDropLog) < dropLogEvery {
		s.droppedLog++
		return
	}
	s.log.Warn("telemetry: series dropped", "source", src.name, "metric", name,
		"series", printableID(id), "reason", why, "unlogged_since_last_line", s.droppedLog, "dropped_total", s.dropped)
	s.lastDropLog, s.droppedLog = now, 0
}

func printableID(id string) string {
	b := []byte(id)
	for i, c := range b {
		switch c {
		case 0xff:
			b[i] = ','
		case 0xfe:
			b[i] = '='
		}
	}
	return string(b)
}

func (s *Store) removeSeries(se *series) {
	list := s.byKey[se.key]
	last := len(list) - 1
	list[se.keyIndex] = list[last]
	list[se.keyIndex].keyIndex = se.keyIndex
	list[last] = nil
	if last == 0 {
		delete(s.byKey, se.key)
	} else {
		s.byKey[se.key] = list[:last]
	}
	s.nseries--
}

func (se *series) add(t int64, v float64) {
	se.ring[se.head] = sample{t, v}
	se.head = (se.head + 1) % len(se.ring)
	if se.n < len(se.ring) {
		se.n++
	}
}

// at returns the i-th oldest sample held.
func (se *series) at(i int) sample {
	return se.ring[(se.head-se.n+i+len(se.ring))%len(se.ring)]
}

// rate is the per-second increase over the window. A decrease is a reset
// (the exporter or the device restarted): the new value is the increase
// since, never a negative or a jump by the old total.
func (se *series) rate() float64 {
	if se.n < 2 {
		return 0
	}
	var inc float64
	prev := se.at(0)
	for i := 1; i < se.n; i++ {
		cur := se.at(i)
		if cur.v >= prev.v {
			inc += cur.v - prev.v
		} else {
			inc += max(cur.v, 0)
		}
		prev = cur
	}
	dt := float64(se.at(se.n-1).t-se.at(0).t) / 1e9
	if dt <= 0 || math.IsInf(inc, 0) {
		return 0 // no time between samples, or counters beyond float range
	}
	return inc / dt
}

func (s *Store) reading(se *series, now time.Time) Reading {
	last := se.at(se.n - 1)
	r := Reading{Key: se.key, Signal: se.signal, Priority: se.prio, Counter: se.counter,
		At: time.Unix(0, last.t).UTC(), Target: se.src.name, Metric: se.metric}
	v := last.v
	if se.invert {
		v = 1 - v
	}
	r.Value = v * se.scale
	if se.counter {
		r.Rate = se.rate() * se.scale
	}
	r.Stale = se.missing > 0 || now.Sub(se.src.lastOK) > se.src.staleness
	return r
}

// Readings returns every current reading of an entity.
func (s *Store) Readings(k Key) []Reading {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.byKey[k]
	out := make([]Reading, 0, len(list))
	for _, se := range list {
		out = append(out, s.reading(se, now))
	}
	sortReadings(out)
	return out
}

// Visit calls fn with each current reading of an entity, in no set order,
// without copying them out: the correlator's hot path. fn must not keep r
// nor call the store.
func (s *Store) Visit(k Key, fn func(r *Reading)) {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, se := range s.byKey[k] {
		r := s.reading(se, now)
		fn(&r)
	}
}

// All returns every current reading, ordered by entity, signal, priority.
func (s *Store) All() []Reading {
	now := s.clock.Now()
	s.mu.RLock()
	out := make([]Reading, 0, s.nseries)
	for _, list := range s.byKey {
		for _, se := range list {
			out = append(out, s.reading(se, now))
		}
	}
	s.mu.RUnlock()
	sortReadings(out)
	return out
}

func sortReadings(rs []Reading) {
	slices.SortFunc(rs, func(a, b Reading) int {
		return cmp.Or(cmp.Compare(a.Key.Kind, b.Key.Kind), cmp.Compare(a.Key.Device, b.Key.Device),
			cmp.Compare(a.Key.Port, b.Key.Port), cmp.Compare(a.Signal, b.Signal),
			cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Target, b.Target))
	})
}

// Stats summarises the store.
type Stats struct {
	Series    int `json:"series"`
	MaxSeries int `json:"maxSeries"`
	// Dropped counts series refused by the cardinality limit.
	Dropped uint64         `json:"dropped"`
	Sources []SourceStatus `json:"sources"`
}

// SourceStatus is a target's or push source's latest answer.
type SourceStatus struct {
	Name   string    `json:"name"`
	LastOK time.Time `json:"lastOk"`
	Error  string    `json:"error,omitempty"`
	Series int       `json:"series"`
	Stale  bool      `json:"stale"`
}

// Stats returns the store's counts and each source's state.
func (s *Store) Stats() Stats {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Series: s.nseries, MaxSeries: s.cfg.Limits.MaxSeries, Dropped: s.dropped}
	for _, src := range s.sources {
		ss := SourceStatus{Name: src.name, LastOK: src.lastOK, Series: len(src.series),
			Stale: now.Sub(src.lastOK) > src.staleness}
		if src.lastErr != nil {
			ss.Error = src.lastErr.Error()
		}
		st.Sources = append(st.Sources, ss)
	}
	slices.SortFunc(st.Sources, func(a, b SourceStatus) int { return cmp.Compare(a.Name, b.Name) })
	return st
}

// PushOptions say whom a push speaks for.
type PushOptions struct {
	// Device is the device of series no label places (when the push
	// source names none).
	Device string
	// PinDevice refuses series on any other device than Device: a node
	// agent speaks for its own server only.
	PinDevice bool
}

// Push ingests pushed exposition text (or protobuf, by contentType) from
// a configured push source, as one answer: series it lacks go stale. It
// returns the samples accepted.
func (s *Store) Push(source string, body io.Reader, contentType string) (int, error) {
	r, err := s.PushWith(source, PushOptions{}, body, contentType)
	return r.Accepted, err
}

// PushWith is Push with the device the push speaks for.
func (s *Store) PushWith(source string, opt PushOptions, body io.Reader, contentType string) (IngestResult, error) {
	p, ok := s.push[source]
	if !ok {
		return IngestResult{}, domain.NotFound("push source", source)
	}
	dev := p.Device
	if opt.PinDevice && dev != "" && dev != opt.Device {
		return IngestResult{}, domain.Errorf(domain.CodePermissionDenied, "push source %q is device %q's, not %q's", source, dev, opt.Device)
	}
	if dev == "" {
		dev = opt.Device
	}
	fams, err := decode(body, contentType)
	if err != nil {
		return IngestResult{}, err
	}
	id := "push:" + source
	if p.Device == "" && dev != "" {
		id += "/" + dev
	}
	at := s.clock.Now()
	s.mu.Lock()
	src := s.sources[id]
	if src == nil {
		src = newSource(id, dev, p.rules, p.Staleness)
		s.sources[id] = src
	}
	src.pin = opt.PinDevice
	s.mu.Unlock()
	return s.ingest(src, fams, at), nil
}

// failed records a scrape that did not answer.
func (s *Store) failed(src *source, err error) {
	s.mu.Lock()
	src.lastErr = err
	s.mu.Unlock()
	s.notify()
}
