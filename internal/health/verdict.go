package health

import (
	"fmt"
	"math"
	"strconv"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// Thresholds decide verdicts. Rates are per second over the telemetry
// window; a reading is beyond its threshold when it is strictly above it,
// so a threshold of 0 means "any". Configurable with the server's
// --health-thresholds file (JSON or YAML with these field names); fields
// left out keep the defaults.
type Thresholds struct {
	// Congested: PFC pause frames received or sent on one priority
	// (default 1000/s: a lossless queue pausing for a sustained share of
	// its time); PFC watchdog storms (default any); ECN-marked packets
	// (default 1000/s); CNPs sent or handled by a NIC (default 1000/s).
	PFCPausePerSec  float64 `json:"pfcPausePerSec"`
	PFCStormPerSec  float64 `json:"pfcStormPerSec"`
	ECNMarkedPerSec float64 `json:"ecnMarkedPerSec"`
	CNPPerSec       float64 `json:"cnpPerSec"`
	// Congested by load: bytes received or sent per second on a port,
	// uplink or NIC above LoadBytesPerSec (default 0: off, as exporters
	// do not say a port's speed the same way; e.g. 45e9 marks a 400G port
	// above 90 %). A hot uplink hurts the jobs crossing it before any
	// PFC pause or ECN mark is counted on a lossy fabric.
	LoadBytesPerSec float64 `json:"loadBytesPerSec"`
	// Lossy: drops and discards (default 1/s: RoCE expects none).
	DropsPerSec float64 `json:"dropsPerSec"`
	// Link errors: CRC errors and uncorrectable FEC codewords (default
	// any), link flaps (default any in the window), a link down, receive
	// power below OpticsRxMinDBm (default -10 dBm) and module temperature
	// above OpticsTempMaxC (default 75 C).
	CRCPerSec            float64 `json:"crcPerSec"`
	FECUncorrectedPerSec float64 `json:"fecUncorrectedPerSec"`
	LinkFlapsPerSec      float64 `json:"linkFlapsPerSec"`
	OpticsRxMinDBm       float64 `json:"opticsRxMinDBm"`
	OpticsTempMaxC       float64 `json:"opticsTempMaxC"`
	// GPU errors: any XID (a non-zero last XID), NVLink and uncorrectable
	// ECC errors above their rates (default any), and a throttle reasons
	// bitmask (DCGM's clocks event reasons) with a bit of ThrottleMask set:
	// default 0xE8, HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40 and
	// HW power brake 0x80; idle, application clocks, SW power cap and sync
	// boost are normal operation.
	NVLinkErrPerSec float64 `json:"nvlinkErrPerSec"`
	ECCErrPerSec    float64 `json:"eccErrPerSec"`
	ThrottleMask    uint64  `json:"throttleMask"`
	// Require lists the hop kinds (gpu, nic, port, uplink) whose lack of
	// any reading makes a path unknown; default port and uplink, the
	// fabric jobfabric owns. Hops of other kinds without data show unknown
	// without making the path so; a stale hop of any kind does.
	Require []string `json:"require"`
}

// DefaultThresholds returns the documented defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{
		PFCPausePerSec: 1000, PFCStormPerSec: 0, ECNMarkedPerSec: 1000, CNPPerSec: 1000,
		DropsPerSec: 1,
		CRCPerSec:   0, FECUncorrectedPerSec: 0, LinkFlapsPerSec: 0, OpticsRxMinDBm: -10, OpticsTempMaxC: 75,
		NVLinkErrPerSec: 0, ECCErrPerSec: 0, ThrottleMask: 0x8 | 0x20 | 0x40 | 0x80,
		Require: []string{HopPort, HopUplink},
	}
}

// Validate names the first bad field.
func (t Thresholds) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"pfcPausePerSec", t.PFCPausePerSec}, {"pfcStormPerSec", t.PFCStormPerSec}, {"ecnMarkedPerSec", t.ECNMarkedPerSec},
		{"cnpPerSec", t.CNPPerSec}, {"dropsPerSec", t.DropsPerSec}, {"crcPerSec", t.CRCPerSec},
		{"fecUncorrectedPerSec", t.FECUncorrectedPerSec}, {"linkFlapsPerSec", t.LinkFlapsPerSec},
		{"nvlinkErrPerSec", t.NVLinkErrPerSec}, {"eccErrPerSec", t.ECCErrPerSec}, {"loadBytesPerSec", t.LoadBytesPerSec}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return domain.Invalid(f.name, "%s is %g; a rate threshold is a finite number >= 0 (0: any; for loadBytesPerSec, off)", f.name, f.v)
		}
	}
	if math.IsNaN(t.OpticsRxMinDBm) || t.OpticsRxMinDBm < -40 || t.OpticsRxMinDBm > 10 {
		return domain.Invalid("opticsRxMinDBm", "opticsRxMinDBm is %g; it must be between -40 and 10 dBm", t.OpticsRxMinDBm)
	}
	if math.IsNaN(t.OpticsTempMaxC) || t.OpticsTempMaxC <= 0 || t.OpticsTempMaxC > 150 {
		return domain.Invalid("opticsTempMaxC", "opticsTempMaxC is %g; it must be above 0 and at most 150 C", t.OpticsTempMaxC)
	}
	for i, k := range t.Require {
		switch k {
		case HopGPU, HopNIC, HopPort, HopUplink:
		default:
			return domain.Invalid(fmt.Sprintf("require[%d]", i), "hop kind %q is not one of gpu, nic, port, uplink", k)
		}
	}
	return nil
}

// finding is one reading beyond its threshold.
type finding struct {
	key       telemetry.Key
	signal    telemetry.Signal
	priority  int
	value     float64
	threshold float64
	verdict   domain.PathVerdict
}

// ratio ranks findings of one verdict: how far beyond the threshold.
func (f finding) ratio() float64 {
	switch {
	case f.signal == telemetry.OpticsRxPower:
		return f.threshold - f.value + 1 // dB below the floor
	case f.threshold > 0:
		return f.value / f.threshold
	}
	return f.value + 1
}

// worse orders findings: higher verdict, then further beyond.
func worse(a, b finding) bool {
	if sa, sb := a.verdict.Severity(), b.verdict.Severity(); sa != sb {
		return sa > sb
	}
	return a.ratio() > b.ratio()
}

// judge returns the finding of one reading, if it crosses a threshold.
func (t *Thresholds) judge(r *telemetry.Reading) (finding, bool) {
	f := finding{key: r.Key, signal: r.Signal, priority: r.Priority}
	rate := func(th float64, v domain.PathVerdict) bool {
		if !r.Counter || r.Rate <= th {
			return false
		}
		f.value, f.threshold, f.verdict = r.Rate, th, v
		return true
	}
	switch r.Signal {
	case telemetry.PFCPauseRx, telemetry.PFCPauseTx:
		return f, rate(t.PFCPausePerSec, domain.PathCongested)
	case telemetry.PFCStorm:
		return f, rate(t.PFCStormPerSec, domain.PathCongested)
	case telemetry.ECNMarked:
		return f, rate(t.ECNMarkedPerSec, domain.PathCongested)
	case telemetry.CNPSent, telemetry.CNPHandled:
		return f, rate(t.CNPPerSec, domain.PathCongested)
	case telemetry.RxBytes, telemetry.TxBytes:
		return f, t.LoadBytesPerSec > 0 && rate(t.LoadBytesPerSec, domain.PathCongested)
	case telemetry.Drops:
		return f, rate(t.DropsPerSec, domain.PathLossy)
	case telemetry.CRCErrors:
		return f, rate(t.CRCPerSec, domain.PathLinkErrors)
	case telemetry.FECUncorrected:
		return f, rate(t.FECUncorrectedPerSec, domain.PathLinkErrors)
	case telemetry.LinkFlaps:
		return f, rate(t.LinkFlapsPerSec, domain.PathLinkErrors)
	case telemetry.GPUNVLinkErr:
		return f, rate(t.NVLinkErrPerSec, domain.PathGPUErrors)
	case telemetry.GPUECCErr:
		return f, rate(t.ECCErrPerSec, domain.PathGPUErrors)
	case telemetry.LinkDown:
		f.value, f.threshold, f.verdict = r.Value, 0, domain.PathLinkErrors
		return f, r.Value >= 1
	case telemetry.OpticsRxPower:
		f.value, f.threshold, f.verdict = r.Value, t.OpticsRxMinDBm, domain.PathLinkErrors
		return f, r.Value < t.OpticsRxMinDBm
	case telemetry.OpticsTemp:
		f.value, f.threshold, f.verdict = r.Value, t.OpticsTempMaxC, domain.PathLinkErrors
		return f, r.Value > t.OpticsTempMaxC
	case telemetry.GPUXid:
		f.value, f.threshold, f.verdict = r.Value, 0, domain.PathGPUErrors
		return f, r.Value != 0
	case telemetry.GPUThrottle:
		f.value, f.threshold, f.verdict = r.Value, float64(t.ThrottleMask), domain.PathGPUErrors
		return f, r.Value >= 0 && r.Value < 1<<53 && uint64(r.Value)&t.ThrottleMask != 0
	}
	return f, false
}

// hopResult is a hop judged.
type hopResult struct {
	verdict  domain.PathVerdict
	findings []finding // beyond threshold, worst first, at most maxFindings
	stale    bool      // every reading the hop has is stale
	noData   bool      // the hop has no reading at all
}

// maxFindings bounds the signals reported per hop.
const maxFindings = 4

// visitor is a Reader that can hand out an entity's readings one by one,
// without copying and sorting them (telemetry.Store): judging needs no
// order, and the loop judges every path after each ingest.
type visitor interface {
	Visit(k telemetry.Key, fn func(*telemetry.Reading))
}

// judgeHop reads every entity of a hop and keeps its worst findings.
func (t *Thresholds) judgeHop(h *Hop, rd telemetry.Reader) hopResult {
	var res hopResult
	fresh, any := 0, 0
	see := func(r *telemetry.Reading) {
		any++
		if r.Stale {
			return
		}
		fresh++
		if f, ok := t.judge(r); ok {
			res.findings = insertFinding(res.findings, f)
		}
	}
	v, visits := rd.(visitor)
	for _, k := range h.Keys {
		if visits {
			v.Visit(k, see)
			continue
		}
		rs := rd.Readings(k)
		for i := range rs {
			see(&rs[i])
		}
	}
	switch {
	case len(res.findings) > 0:
		res.verdict = res.findings[0].verdict
	case fresh > 0:
		res.verdict = domain.PathHealthy
	default:
		res.verdict = domain.PathUnknown
		res.noData, res.stale = any == 0, any > 0
	}
	return res
}

// insertFinding keeps the worst maxFindings, worst first.
func insertFinding(fs []finding, f finding) []finding {
	i := len(fs)
	for i > 0 && worse(f, fs[i-1]) {
		i--
	}
	if i >= maxFindings {
		return fs
	}
	fs = append(fs, finding{})
	copy(fs[i+1:], fs[i:])
	fs[i] = f
	if len(fs) > maxFindings {
		fs = fs[:maxFindings]
	}
	return fs
}

// entity names a key for people: device/port.
func entity(k telemetry.Key) string { return k.Device + "/" + k.Port }

// describe is a finding as a message: "leaf-1/swp3 pfc_pause_rx[3]
// 12000/s > 1000/s".
func (f finding) describe() string {
	sig := string(f.signal)
	if f.priority >= 0 && (f.signal == telemetry.PFCPauseRx || f.signal == telemetry.PFCPauseTx) {
		sig += "[" + strconv.Itoa(f.priority) + "]"
	}
	switch f.signal {
	case telemetry.LinkDown:
		return entity(f.key) + " link down"
	case telemetry.OpticsRxPower:
		return fmt.Sprintf("%s %s %.1f dBm < %.1f dBm", entity(f.key), sig, f.value, f.threshold)
	case telemetry.OpticsTemp:
		return fmt.Sprintf("%s %s %.0f C > %.0f C", entity(f.key), sig, f.value, f.threshold)
	case telemetry.GPUXid:
		return fmt.Sprintf("%s XID %.0f", entity(f.key), f.value)
	case telemetry.GPUThrottle:
		return fmt.Sprintf("%s throttle reasons %#x", entity(f.key), uint64(f.value))
	}
	return fmt.Sprintf("%s %s %.3g/s > %g/s", entity(f.key), sig, f.value, f.threshold)
}
