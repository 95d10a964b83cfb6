// Package lab builds a real EVPN-VXLAN fabric out of Linux network
// namespaces from a small topology file, for proving isolation with
// packets: one namespace per spine and leaf running FRR (zebra with the
// netns VRF backend, bgpd), veth uplinks and server links named as the
// topology's ports, and one namespace per server NIC (a "GPU endpoint")
// holding the server side of its cable's addresses.
//
// The lab starts every switch's daemons with an empty configuration and
// writes a targets file for the deploy driver (internal/deploy): a
// jobfabric server pointed at it (--fabric-driver frr --frr-targets
// RUN_DIR/targets.json) compiles, renders and deploys the fabric through
// its normal path, and the driver's lab flavour creates the VRF
// namespaces, L3VNI tunnels and port memberships that each rendered
// frr.conf declares. The lab itself never configures routing.
//
// Hygiene: a unique namespace prefix and run directory per lab, one lab
// per state directory (a second Up is refused), each switch's daemons in a
// private mount namespace whose /run/netns holds only that switch's VRFs,
// no route out of the lab, and teardown by PID and namespace name.
package lab
