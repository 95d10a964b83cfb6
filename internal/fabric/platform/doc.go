// Package platform knows the switches the fabric renders for: each model's
// front-panel port map (ports, lanes, breakout modes), how each NOS names
// those ports (Ethernet1/1, et-0/0/0:0, Ethernet1/1, Ethernet0, swp1), how
// NOS versions compare, and from which version each NOS has each feature
// the renderers use.
//
// Why a package of its own: the topology validator (a port the platform
// lacks), the renderers (the interface names a switch accepts) and the
// feature check (a release too old for what the config needs) must agree on
// one table, and the table is data that grows one vendor document at a time.
// It imports nothing of ours and does no I/O.
package platform
