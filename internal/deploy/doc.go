// Package deploy applies rendered device configurations through drivers:
// file (each device's files written atomically into a directory, for
// review or for a config-management system to pick up), frr (running
// FRR daemons reloaded with frr-reload.py, nftables rulesets loaded into
// the device's VRF namespaces) and ssh (the frr driver's steps run on a
// remote Linux switch over SSH, through the same Host interface, the
// host key always verified). A device is applied whole or not at all:
// the file driver swaps a symlink, the frr and ssh drivers check the
// whole config first and restore the previous one if the reload fails;
// a connection lost during a reload is reported as the device's state
// unknown, never as applied.
//
// Every deploy goes through Checked first: the device's configuration is
// linted (internal/fabric/lint) and, where the driver can ask the switch
// (Shower), the preparations no configuration line can make are checked
// (NX-OS: the security-groups routing template and its reload). What it
// finds is reported as the switch's conditions (domain.SwitchCondition),
// including the disruptive lines a deploy adds (a forwarding-engine
// restart).
package deploy
