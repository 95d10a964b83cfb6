package telemetry

import "time"

// Kind is the kind of inventory entity a series belongs to.
type Kind string

const (
	// KindPort is a switch port: Device is the switch (leaf or spine) as
	// the topology names it, Port the port as the topology names it.
	KindPort Kind = "port"
	// KindNIC is a host NIC: Device is the server, Port the NIC name as
	// the topology names it (the netdev, e.g. eth0) or its RDMA device
	// (mlx5_0); rules map exporter labels to one of those.
	KindNIC Kind = "nic"
	// KindGPU is a GPU: Device is the server, Port the GPU UUID when the
	// exporter gives one, else the GPU index as a decimal string.
	KindGPU Kind = "gpu"
)

// Key names the entity a reading is about.
type Key struct {
	Kind   Kind   `json:"kind"`
	Device string `json:"device"`
	Port   string `json:"port"`
}

// Signal is a kind of health signal, whatever the exporter called it.
type Signal string

// The signals jobfabric understands. Counters are read as per-second rates;
// gauges (optics) as values.
const (
	PFCPauseRx     Signal = "pfc_pause_rx"    // pause frames received (per priority: Reading.Priority)
	PFCPauseTx     Signal = "pfc_pause_tx"    // pause frames sent
	PFCStorm       Signal = "pfc_storm"       // PFC watchdog storm detections
	ECNMarked      Signal = "ecn_marked"      // ECN/WRED-marked packets
	CNPSent        Signal = "cnp_sent"        // congestion notification packets sent (NIC, notification point)
	CNPHandled     Signal = "cnp_handled"     // CNPs handled (NIC, reaction point)
	Drops          Signal = "drops"           // discards and queue/buffer drops
	CRCErrors      Signal = "crc_errors"      // CRC / FCS / symbol errors
	FECUncorrected Signal = "fec_uncorrected" // uncorrectable FEC codewords
	LinkFlaps      Signal = "link_flaps"      // carrier changes / link down events
	LinkDown       Signal = "link_down"       // gauge: 1 when the link is down
	OpticsRxPower  Signal = "optics_rx_dbm"   // gauge: receive power in dBm
	OpticsTemp     Signal = "optics_temp_c"   // gauge: module temperature in Celsius
	RxBytes        Signal = "rx_bytes"        // bytes received (load, not a fault)
	TxBytes        Signal = "tx_bytes"        // bytes sent
	GPUXid         Signal = "gpu_xid"         // gauge: last XID error (0: none)
	GPUNVLinkErr   Signal = "gpu_nvlink_errors"
	GPUECCErr      Signal = "gpu_ecc_errors" // uncorrectable (double-bit) ECC errors
	GPUThrottle    Signal = "gpu_throttle"   // gauge: throttle reasons bitmask (thermal, power...)
)

// Reading is the latest view of one signal on one entity.
type Reading struct {
	Key    Key    `json:"key"`
	Signal Signal `json:"signal"`
	// Priority is the PFC/queue priority when the series has one, else -1.
	Priority int `json:"priority"`
	// Rate is the per-second increase over the window for counters (resets
	// excluded); Value is the latest sample (counters: the raw counter).
	Rate  float64 `json:"rate"`
	Value float64 `json:"value"`
	// Counter says whether Rate is meaningful.
	Counter bool      `json:"counter"`
	At      time.Time `json:"at"`
	// Stale: the series' target has not answered within its staleness
	// bound, or the series vanished from a scrape that answered.
	Stale bool `json:"stale"`
	// Target is the scrape target (or push source) the series came from.
	Target string `json:"target"`
	// Metric is the exporter's metric name: two series may give one
	// signal (receive and transmit drops).
	Metric string `json:"metric"`
}

// Reader is what the correlator reads: every current reading of an entity.
type Reader interface {
	Readings(k Key) []Reading
}

// The ingest side (store.go, scrape.go, config.go) provides (and more:
// PushWith, Stats, RunWith, BuiltinRules):
//
//	func ParseConfig(b []byte) (Config, error)            // YAML: targets, rules, limits
//	func NewStore(cfg Config, clock tstime.Clock, log *slog.Logger) (*Store, error)
//	func (s *Store) Run(ctx context.Context)               // scrapes cfg.Targets on their intervals
//	func (s *Store) Push(source string, body io.Reader, contentType string) (int, error)
//	func (s *Store) Readings(k Key) []Reading              // Reader
//	func (s *Store) All() []Reading                         // every current reading (hotspots)
//	func (s *Store) Changed() <-chan struct{}               // signalled (coalesced) after an ingest
