// Package fabric is the intent compiler: it turns the inventory, the
// tenants, the scheduler's allocations and the pool ids into the desired
// state of every leaf and spine (Intent), independent of any NOS. Renderers
// (internal/fabric/render) turn an Intent into device configurations.
//
// Why a compiler of its own: the scheduler decides which tenant and job hold
// which GPUs; isolation holds only if the network says exactly the same. The
// compiler is the one place that maps an allocation to ports, VRFs and group
// rules, so the two layers cannot drift apart.
//
// What it decides, per device:
//   - Underlay: ASN, loopback (router ID and VTEP source), one eBGP session
//     per uplink, unnumbered (RFC 5549) where the uplink has no IPv4 and
//     numbered where it has (spine takes the first address of the /31); the
//     EVPN family either on those sessions (default, as in the reference lab)
//     or on loopback multihop sessions (Options.Overlay). Spines are EVPN
//     route servers: they keep the originating VTEP as next hop.
//   - Per tenant on leaves: an IP-VRF with its L3VNI, a route distinguisher
//     unique per device and VRF (loopback:VRF id) and one explicit route
//     target (Options.RTASN:value) for import and export, the same on every
//     leaf: automatic targets are ASN:VNI and differ between leaves of an
//     eBGP fabric, so nothing would be imported. VRFs exist on every leaf of
//     the tenant's sites, or only where the tenant owns a port.
//   - Per server port: the VRF of the tenant that owns the link, or none. A
//     server-isolated tenant owns every link of a server it holds; a
//     GPU-isolated tenant owns the link of each GPU it holds (the NIC whose
//     NIC.GPU names it). Pure type-5 ports are routed with the cable's /31
//     and /127, which belong to the cable and never change with the tenant.
//     Vlan-aware ports get their own VLAN and L2VNI and an anycast gateway
//     from a /27 and /64 derived from the link (IRBSubnets).
//   - Job segmentation: each running job's ports are classified into the
//     job's 16-bit group; within a group traffic is allowed, between groups
//     of a tenant denied unless a contract allows it. The same policy is also
//     given as per-port allow-lists (ACL) for switches without group policy.
//
// The package is pure: standard library, internal/domain and nothing that
// does I/O. Compile reads no clock and no randomness and never depends on map
// order, so the server, the CLI's dry run and the simulator get the same
// intent from the same input.
package fabric
