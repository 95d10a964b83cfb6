// Package render turns a fabric intent (internal/fabric) into the
// configuration files of each switch: Junos set commands, NX-OS and EOS
// running-config, SONiC CONFIG_DB JSON with its frr.conf, and FRR frr.conf
// with nftables group-policy rules for Linux leaves. It also diffs two
// renders per device (Diff), so an operator sees exactly which lines a
// deploy changes.
//
// Why a package: the intent says what the fabric must do; each NOS says it
// differently, and operators review configs in their NOS's own words. The
// renderers follow the vendors' published examples (see
// shared/reference/fabric-facts.md): explicit route targets everywhere,
// RD = loopback:vrf-id, the FRR layout of the reference EVPN lab. Where a NOS
// has no VXLAN group policy here (EOS, SONiC, Junos on a platform without
// GBP: Caps) job segmentation is rendered as per-port ACLs, and the output
// says so in a comment. What a platform adds to its NOS (Junos GBP,
// overlay-ecmp) comes in Options.Caps; internal/fabric/lint checks every
// render against the switches' own load-time rules.
//
// Every NOS also renders the server-port defences the intent carries: a
// quarantined port is administratively down, and every server port's
// ingress guard (nothing to the underlay, only ICMP to the switch itself)
// is a filter or ACL on the hardware NOSes, merged with the segmentation
// ACL, and nftables rulesets (guard.nft, guard-<vrf>.nft) on Linux leaves.
//
// Renderers are pure functions of the intent: output is byte-for-byte stable
// (sorted everywhere), which the golden tests rely on. Checking FRR output
// with vtysh and nftables output with nft happens in tests only.
package render
