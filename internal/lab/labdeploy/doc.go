// Package labdeploy is the deploy driver of the lab (internal/lab): the frr
// driver (internal/deploy) plus the kernel plumbing a real NOS does by
// itself and the lab's Linux namespaces do not — a VRF namespace with its
// L3VNI VXLAN device and bridge, ports moved into their VRF — built from
// the frr.conf it applies. The CLI injects it into the server with
// `--fabric-driver lab --frr-targets RUN_DIR/targets.json`; the server and
// internal/deploy never know the lab exists.
package labdeploy
