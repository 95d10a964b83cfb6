package telemetry

import (
	"slices"
)

// The built-in rule sets, by the name a target's rules field gives.
// Metric and label names are the exporters' own; each group cites where
// they are defined.
var builtinSets = map[string][]Rule{
	"node-exporter":        nodeExporterRules,
	"node-exporter-switch": asPorts(nodeExporterRules),
	"sonic-exporter":       sonicExporterRules,
	"dcgm-exporter":        dcgmExporterRules,
}

// asPorts reads node_exporter on a Linux switch (SONiC's host, Cumulus,
// an FRR box, the lab's leaves): its netdevs are the switch's front-panel
// ports, named as the topology names them, the switch being the target's
// device.
func asPorts(rules []Rule) []Rule {
	out := slices.Clone(rules)
	for i := range out {
		out[i].Kind = KindPort
	}
	return out
}

// BuiltinRuleSets names the built-in rule sets.
func BuiltinRuleSets() []string {
	var out []string
	for n := range builtinSets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// BuiltinRules returns a copy of a built-in rule set (nil if unknown).
func BuiltinRules(name string) []Rule {
	return slices.Clone(builtinSets[name])
}

func counter(metric string, sig Signal, kind Kind, port ...string) Rule {
	return Rule{Metric: metric, Signal: sig, Counter: true, Kind: kind, PortLabels: port, Scale: 1}
}

func gauge(metric string, sig Signal, kind Kind, port ...string) Rule {
	return Rule{Metric: metric, Signal: sig, Kind: kind, PortLabels: port, Scale: 1}
}

func (r Rule) where(label, re string) Rule {
	m := map[string]string{}
	for k, v := range r.Match {
		m[k] = v
	}
	m[label] = re
	r.Match = m
	return r
}

func (r Rule) prio(label string) Rule { r.PriorityLabel = label; return r }

func (r Rule) device(labels ...string) Rule { r.DeviceLabels = labels; return r }

func (r Rule) inverted() Rule { r.Invert = true; return r }

// nodeExporterRules read Prometheus node_exporter on a server: every
// series is one of the server's NICs (label device: the netdev, or the
// RDMA device for infiniband), the server being the target's device.
var nodeExporterRules = []Rule{
	// collector/netdev_linux.go + netdev_common.go (prometheus/node_exporter):
	// node_network_{receive,transmit}_<field>_total{device}.
	counter(`node_network_receive_bytes_total`, RxBytes, KindNIC, "device"),
	counter(`node_network_transmit_bytes_total`, TxBytes, KindNIC, "device"),
	counter(`node_network_receive_drop_total`, Drops, KindNIC, "device"),
	counter(`node_network_transmit_drop_total`, Drops, KindNIC, "device"),
	// rx errors count CRC/frame errors (the kernel's rx_errors sums them);
	// tx errors lose the packet: counted as drops.
	counter(`node_network_receive_errs_total`, CRCErrors, KindNIC, "device"),
	counter(`node_network_transmit_errs_total`, Drops, KindNIC, "device"),
	// collector/netclass_linux.go: carrier_changes_total, up (operstate
	// "up"), carrier (1 when the link has carrier).
	counter(`node_network_carrier_changes_total`, LinkFlaps, KindNIC, "device"),
	gauge(`node_network_up`, LinkDown, KindNIC, "device").inverted(),
	gauge(`node_network_carrier`, LinkDown, KindNIC, "device").inverted(),
	// collector/ethtool_linux.go: node_ethtool_<stat>{device}, the stat
	// lower-cased with rx/tx spelled received/transmitted
	// (buildEthtoolFQName). mlx5 stats (host-facts: ethtool -S):
	// rx_prio3_pause -> node_ethtool_received_prio3_pause.
	counter(`node_ethtool_received_prio(?P<priority>[0-7])_pause`, PFCPauseRx, KindNIC, "device"),
	counter(`node_ethtool_transmitted_prio(?P<priority>[0-7])_pause`, PFCPauseTx, KindNIC, "device"),
	counter(`node_ethtool_received_pause_ctrl_phy`, PFCPauseRx, KindNIC, "device"),
	counter(`node_ethtool_transmitted_pause_ctrl_phy`, PFCPauseTx, KindNIC, "device"),
	counter(`node_ethtool_received_discards_phy`, Drops, KindNIC, "device"),
	counter(`node_ethtool_received_out_of_buffer`, Drops, KindNIC, "device"),
	counter(`node_ethtool_received_crc_errors_phy`, CRCErrors, KindNIC, "device"),
	counter(`node_ethtool_received_symbol_err_phy`, CRCErrors, KindNIC, "device"),
	// collector/infiniband_linux.go: node_infiniband_<counter>{device,port},
	// device being the RDMA device (mlx5_0).
	counter(`node_infiniband_link_downed_total`, LinkFlaps, KindNIC, "device"),
	counter(`node_infiniband_symbol_error_total`, CRCErrors, KindNIC, "device"),
	counter(`node_infiniband_port_errors_received_total`, CRCErrors, KindNIC, "device"),
	counter(`node_infiniband_port_discards_received_total`, Drops, KindNIC, "device"),
	counter(`node_infiniband_port_discards_transmitted_total`, Drops, KindNIC, "device"),
	counter(`node_infiniband_port_data_received_bytes_total`, RxBytes, KindNIC, "device"),
	counter(`node_infiniband_port_data_transmitted_bytes_total`, TxBytes, KindNIC, "device"),
}

// sonicExporterRules read vinted/sonic-exporter on a SONiC switch (it
// reads COUNTERS_DB; see shared/data/fixtures). Its label device is the
// switch port (Ethernet0), the switch being the target's device.
var sonicExporterRules = []Rule{
	// internal/collector/interface_collector.go: namespace sonic,
	// subsystem interface; receive_errs/transmit_errs{device,type} with
	// type error|discard|drop|pause from SAI_PORT_STAT_IF_IN_ERRORS,
	// _IF_IN_DISCARDS, _IN_DROPPED_PKTS, _PAUSE_RX_PKTS (out: no drop).
	counter(`sonic_interface_receive_bytes`, RxBytes, KindPort, "device"),
	counter(`sonic_interface_transmit_bytes`, TxBytes, KindPort, "device"),
	counter(`sonic_interface_receive_errs`, CRCErrors, KindPort, "device").where("type", "error"),
	counter(`sonic_interface_receive_errs`, Drops, KindPort, "device").where("type", "discard|drop"),
	counter(`sonic_interface_receive_errs`, PFCPauseRx, KindPort, "device").where("type", "pause"),
	counter(`sonic_interface_transmit_errs`, Drops, KindPort, "device").where("type", "discard|error"),
	counter(`sonic_interface_transmit_errs`, PFCPauseTx, KindPort, "device").where("type", "pause"),
	// internal/collector/queue_collector.go: subsystem queue;
	// dropped_packets_total{device,queue} from SAI_QUEUE_STAT_DROPPED_PACKETS.
	// SONiC maps traffic class n to queue n, so the queue is the priority.
	counter(`sonic_queue_dropped_packets_total`, Drops, KindPort, "device").prio("queue"),
}

// dcgmExporterRules read NVIDIA dcgm-exporter: labels gpu (index), UUID,
// device (nvidia0), modelName, Hostname (etc/default-counters.csv and
// its recorded outputs). The GPU is its UUID, the server Hostname when
// present, else the target's device.
var dcgmExporterRules = []Rule{
	// etc/default-counters.csv: "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the
	// last XID error encountered."
	gauge(`DCGM_FI_DEV_XID_ERRORS`, GPUXid, KindGPU, "UUID", "gpu").device("Hostname"),
	// default-counters.csv (commented out by default), counters:
	// DCGM_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL.
	counter(`DCGM_FI_DEV_NVLINK_(?:CRC_FLIT|CRC_DATA|REPLAY|RECOVERY)_ERROR_COUNT_TOTAL`, GPUNVLinkErr, KindGPU, "UUID", "gpu").device("Hostname"),
	// DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter: double-bit volatile ECC errors.
	counter(`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, GPUECCErr, KindGPU, "UUID", "gpu").device("Hostname"),
	// DCGM field 112: DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, renamed
	// DCGM_FI_DEV_CLOCKS_EVENT_REASONS in DCGM 3.3 (bitmask gauge).
	gauge(`DCGM_FI_DEV_(?:CLOCK_THROTTLE|CLOCKS_EVENT)_REASONS`, GPUThrottle, KindGPU, "UUID", "gpu").device("Hostname"),
}
