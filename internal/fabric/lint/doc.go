// Package lint checks rendered switch configurations against the rules the
// switches themselves apply when a configuration is loaded, so a render
// that would fail on the box fails here first: in the render tests, and
// before every deploy (internal/deploy).
//
// Each rule cites the vendor document it comes from. The rules are
// per dialect (Junos set commands, NX-OS and EOS running-config, FRR,
// SONiC's CONFIG_DB patch):
// features enabled before the lines that need them, every referenced
// object (VRF, ACL, filter, policy, group, peer group, VLAN) defined before
// use (anywhere in the candidate on Junos, which commits the whole
// configuration at once; above the use on NX-OS and EOS, which apply line
// by line), no breakout sub-port named before the port is broken out, and
// no route target shared between two EVPN instances that must not share
// it, on one device and across the fabric.
//
// Rules that need to know the switch model and release (interface names
// valid for the platform, per-feature minimum versions) are Hooks the
// platform inventory fills; without hooks they are not checked.
//
// The package is pure: text in, findings out. It knows no renderer; the
// render tests and the deploy drivers hand it the files.
package lint
