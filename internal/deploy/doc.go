// Package deploy applies rendered device configurations through drivers:
// file (each device's files written atomically into a directory, for
// review or for a config-management system to pick up) and frr (running
// FRR daemons reloaded with frr-reload.py, nftables rulesets loaded into
// the device's VRF namespaces). A device is applied whole or not at all:
// the file driver swaps a symlink, the frr driver checks the whole config
// first and restores the previous one if the reload fails.
package deploy
