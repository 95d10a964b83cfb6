package lab

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	spine  = netip.MustParseAddr("10.252.1.1")
	super  = netip.MustParseAddr("10.252.0.1")
	vtep   = netip.MustParseAddr("10.254.1.3")
	server = netip.MustParseAddr("10.0.0.13")
)

// The raw packets are well formed (a receiving kernel drops a bad
// checksum, and the test would pass blind) and the tap recognises each,
// naming its vector and attacker.
func TestRawPackets(t *testing.T) {
	probe := Probe{Attacker: 3, VTEP: vtep, VNI: 10001, Group: 7, Dst: netip.MustParseAddr("10.0.0.2"), Outer: spine}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, tc := range []struct {
		name   string
		pkt    []byte
		vector string
		want   string
	}{
		{"spoofed SYN", SpoofedBGP(3, spine, super, 65001, 255)[0], "spoofed-bgp", "[S] 10.252.1.1:18947 -> 10.252.0.1:179 ttl 255"},
		{"spoofed OPEN", SpoofedBGP(3, spine, super, 65001, 255)[1], "spoofed-bgp", "[AP] 10.252.1.1:18947 -> 10.252.0.1:179 ttl 255"},
		{"TTL echo", LowTTL(3, server, super, 2)[0], "ttl", "echo request 10.0.0.13 -> 10.252.0.1 ttl 2"},
		{"TTL SYN", LowTTL(3, server, super, 2)[1], "ttl", "[S] 10.0.0.13:19203 -> 10.252.0.1:179 ttl 2"},
		{"tunnel TTL", TunnelTTL(3, server, netip.MustParseAddr("10.0.0.2"), 3)[0], "tunnel-ttl", "echo request 10.0.0.13 -> 10.0.0.2 ttl 3"},
		{"spoofed VXLAN", SpoofedVXLAN(probe, mac, mac, server), "spoofed-vxlan", "VXLAN 10.252.1.1 -> 10.254.1.3 ttl 64"},
		{"spoofed source", SpoofedEcho(probe), "spoofed-src", "echo request 10.252.1.1 -> 10.0.0.2 ttl 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pkt
			if inetChecksum(p[:20]) != 0 || int(binary.BigEndian.Uint16(p[2:])) != len(p) {
				t.Fatalf("bad IPv4 header % x", p[:20])
			}
			src, dst := netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
			switch p[9] {
			case 6:
				if inetChecksum(pseudo(src, dst, 6, p[20:])) != 0 {
					t.Fatal("bad TCP checksum")
				}
			case 1:
				if inetChecksum(p[20:]) != 0 {
					t.Fatal("bad ICMP checksum")
				}
			}
			c, ok := ClassifyRaw(p)
			if !ok || c.Vector != tc.vector || c.Attacker != 3 || !strings.HasPrefix(c.What, tc.want) {
				t.Fatalf("ClassifyRaw = %+v, %v; want vector %s, attacker 3, %q", c, ok, tc.vector, tc.want)
			}
		})
	}

	// The OPEN is a BGP OPEN (marker, length 29, type 1, version 4, AS,
	// the spoofed router id).
	open := SpoofedBGP(3, spine, super, 65001, 255)[1][40:]
	if len(open) != 29 || open[18] != 1 || open[19] != 4 || binary.BigEndian.Uint16(open[20:]) != 65001 || netip.AddrFrom4([4]byte(open[24:28])) != spine {
		t.Fatalf("BGP OPEN % x", open)
	}
	// The spoofed echo names its spoofed source at the victim.
	se := SpoofedEcho(probe)
	want := probe
	want.VTEP = netip.IPv4Unspecified()
	if got, ok := parseProbePayload(se[28:]); !ok || got != want {
		t.Fatalf("spoofed echo's probe %+v, %v; want %+v", got, ok, want)
	}
	// The spoofed VXLAN's inner echo names the spoofed source at the victim.
	vx := SpoofedVXLAN(probe, mac, mac, server)
	inner := vx[20+8+8+14:]
	got, ok := parseProbePayload(inner[20+8:])
	if !ok || got != probe {
		t.Fatalf("inner probe %+v, %v; want %+v", got, ok, probe)
	}
}

// Answers to raw packets count (the target's kernel or bgpd answered);
// the fabric's own traffic does not.
func TestClassifyAnswers(t *testing.T) {
	synack := rawTCP(super, spine, 64, 179, rawPort(VectorSpoofBGP, 2), 99, RawSeq+1, tcpSYN|tcpACK, nil)
	binary.BigEndian.PutUint16(synack[4:], 0x1234) // the kernel's identification
	binary.BigEndian.PutUint16(synack[10:], 0)
	binary.BigEndian.PutUint16(synack[10:], inetChecksum(synack[:20]))
	if c, ok := ClassifyRaw(synack); !ok || c.Vector != "spoofed-bgp" || c.Attacker != 2 || !strings.HasPrefix(c.What, "answer [SA]") {
		t.Errorf("SYN-ACK: %+v, %v", c, ok)
	}
	// Time exceeded from a spine, quoting a low-TTL SYN.
	syn := LowTTL(1, server, super, 1)[1]
	icmp := append([]byte{11, 0, 0, 0, 0, 0, 0, 0}, syn[:28]...)
	te := rawIPv4(spine, server, 64, 1, icmp)
	if c, ok := ClassifyRaw(te); !ok || c.Vector != "ttl" || c.Attacker != 1 || !strings.Contains(c.What, "ICMP type 11 code 0 10.252.1.1 -> 10.0.0.13 quoting 10.0.0.13 -> 10.252.0.1") {
		t.Errorf("time exceeded: %+v, %v", c, ok)
	}
	// Time exceeded from a super-spine, quoting a tunnel's packet that
	// carries a tunnelled echo.
	echo := TunnelTTL(4, server, netip.MustParseAddr("10.0.0.2"), 3)[0]
	tunnel := rawIPv4(vtep, netip.MustParseAddr("10.254.1.1"), 1, 17,
		append(append([]byte{0xd4, 0x31, 0x12, 0xb5, 0, 0, 0, 0, 0x88, 0, 0, 0, 0, 0x27, 0x11, 0}, make([]byte, 12)...), append([]byte{8, 0}, echo...)...))
	binary.BigEndian.PutUint16(tunnel[4:], 0x1234)
	te = rawIPv4(super, vtep, 64, 1, append([]byte{11, 0, 0, 0, 0, 0, 0, 0}, tunnel...))
	if c, ok := ClassifyRaw(te); !ok || c.Vector != "tunnel-ttl" || c.Attacker != 4 {
		t.Errorf("time exceeded for a tunnel: %+v, %v", c, ok)
	}
	// Not ours: BGP between switches, a kernel VXLAN packet, an echo
	// without the marker, a SYN to 179 with another sequence number.
	keepalive := rawTCP(spine, super, 255, 40000, 179, 5, 6, tcpPSH|tcpACK, make([]byte, 19))
	kernelVX := rawIPv4(vtep, spine, 64, 17, append([]byte{0xd4, 0x31, 0x12, 0xb5, 0, 16, 0, 0}, make([]byte, 8)...))
	ping := rawIPv4(server, super, 64, 1, []byte{8, 0, 0, 0, 0x4a, 1, 0, 1, 'a', 'b', 'c', 'd'})
	otherSYN := rawTCP(server, super, 64, rawPort(VectorSpoofBGP, 1), 179, 12345, 0, tcpSYN, nil)
	for name, p := range map[string][]byte{"keepalive": keepalive, "kernel VXLAN": kernelVX, "ping": ping, "SYN": otherSYN, "short": ping[:10]} {
		if c, ok := ClassifyRaw(p); ok {
			t.Errorf("%s classified as %+v", name, c)
		}
	}
}

func pseudo(src, dst netip.Addr, proto uint8, seg []byte) []byte {
	s, d := src.As4(), dst.As4()
	b := append(append(append([]byte{}, s[:]...), d[:]...), 0, proto)
	b = binary.BigEndian.AppendUint16(b, uint16(len(seg)))
	return append(b, seg...)
}
