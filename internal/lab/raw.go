package lab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Raw packets: what a root user on a server sends when the kernel's
// sockets will not (a spoofed source address, a chosen TTL, a TCP segment
// no handshake preceded), and the tap on the switches that tells where
// they went. Every raw packet carries the IPv4 identification RawID and
// names its attacker in its source port (or echo identifier), so the tap
// tells them from the fabric's own traffic.

const (
	// RawID is the IPv4 identification of every raw packet.
	RawID = 0x4a46
	// RawSeq is the sequence number of every raw TCP SYN ("JFAT"); the
	// segment after it (the BGP OPEN) has RawSeq+1.
	RawSeq = 0x4a464154
)

// The vectors a raw packet belongs to, from its source port (TCP, UDP)
// or echo identifier (ICMP): the high byte names the vector, the low byte
// the attacker.
const (
	VectorSpoofBGP   = 0x4a // a SYN and a BGP OPEN from a spoofed switch address
	VectorTTL        = 0x4b // echo and SYN with a TTL that runs out inside the fabric
	VectorSpoofVXLAN = 0x4c // VXLAN-GBP from a spoofed VTEP address
	VectorTunnelTTL  = 0x4d // echo and SYN with a low TTL to a peer across the tunnel
	VectorSpoofSrc   = 0x4e // echo from another endpoint's address
)

func vectorName(v byte) string {
	switch v {
	case VectorSpoofBGP:
		return "spoofed-bgp"
	case VectorTTL:
		return "ttl"
	case VectorSpoofVXLAN:
		return "spoofed-vxlan"
	case VectorTunnelTTL:
		return "tunnel-ttl"
	case VectorSpoofSrc:
		return "spoofed-src"
	}
	return fmt.Sprintf("vector-%#x", v)
}

func rawPort(vector byte, attacker uint16) uint16 { return uint16(vector)<<8 | attacker&0xff }

// rawIPv4 builds an IPv4 header (identification RawID, don't fragment)
// and appends payload.
func rawIPv4(src, dst netip.Addr, ttl, proto uint8, payload []byte) []byte {
	ip := make([]byte, 20, 20+len(payload))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(ip[4:], RawID)
	ip[6] = 0x40 // DF
	ip[8], ip[9] = ttl, proto
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	return append(ip, payload...)
}

// l4Checksum is the TCP or UDP checksum over the IPv4 pseudo-header.
func l4Checksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	s, d := src.As4(), dst.As4()
	ph := make([]byte, 0, 12+len(seg))
	ph = append(ph, s[:]...)
	ph = append(ph, d[:]...)
	ph = append(ph, 0, proto)
	ph = binary.BigEndian.AppendUint16(ph, uint16(len(seg)))
	return inetChecksum(append(ph, seg...))
}

func rawTCP(src, dst netip.Addr, ttl uint8, sport, dport uint16, seq, ack uint32, flags byte, payload []byte) []byte {
	seg := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(seg[0:], sport)
	binary.BigEndian.PutUint16(seg[2:], dport)
	binary.BigEndian.PutUint32(seg[4:], seq)
	binary.BigEndian.PutUint32(seg[8:], ack)
	seg[12] = 5 << 4
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 64240)
	seg = append(seg, payload...)
	binary.BigEndian.PutUint16(seg[16:], l4Checksum(src, dst, unix.IPPROTO_TCP, seg))
	return rawIPv4(src, dst, ttl, unix.IPPROTO_TCP, seg)
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// bgpOpen is a BGP OPEN message (RFC 4271 4.2) from AS as with router id
// id and a hold time of 9 s, without optional parameters.
func bgpOpen(as uint16, id netip.Addr) []byte {
	b := bytes.Repeat([]byte{0xff}, 16)
	b = binary.BigEndian.AppendUint16(b, 29)
	b = append(b, 1, 4) // OPEN, version 4
	b = binary.BigEndian.AppendUint16(b, as)
	b = binary.BigEndian.AppendUint16(b, 9)
	i := id.As4()
	b = append(b, i[:]...)
	return append(b, 0)
}

// SpoofedBGP is what an attacker sends to open a BGP session with dst
// pretending to be src (a switch the target might peer with), blind: a
// SYN, then the segment the handshake would have allowed carrying a BGP
// OPEN from AS as, both with TTL ttl (255 is what a one-hop TTL check
// expects).
func SpoofedBGP(attacker uint16, src, dst netip.Addr, as uint16, ttl uint8) [][]byte {
	sport := rawPort(VectorSpoofBGP, attacker)
	return [][]byte{
		rawTCP(src, dst, ttl, sport, 179, RawSeq, 0, tcpSYN, nil),
		rawTCP(src, dst, ttl, sport, 179, RawSeq+1, 1, tcpPSH|tcpACK, bgpOpen(as, src)),
	}
}

// LowTTL is an echo request and a SYN to port 179 from src to dst with
// TTL ttl: sent past the attacker's leaf with a TTL that runs out at a
// spine or super-spine, they make that switch's control plane answer.
func LowTTL(attacker uint16, src, dst netip.Addr, ttl uint8) [][]byte {
	return lowTTL(VectorTTL, attacker, src, dst, ttl)
}

// TunnelTTL is LowTTL to a peer the attacker may reach (its job's
// endpoint behind another leaf): the leaves carry it in VXLAN, and a
// tunnel that inherited the inner TTL would expire at a spine or a
// super-spine.
func TunnelTTL(attacker uint16, src, dst netip.Addr, ttl uint8) [][]byte {
	return lowTTL(VectorTunnelTTL, attacker, src, dst, ttl)
}

func lowTTL(vector byte, attacker uint16, src, dst netip.Addr, ttl uint8) [][]byte {
	icmp := make([]byte, 8, 8+8)
	icmp[0] = 8
	binary.BigEndian.PutUint16(icmp[4:], rawPort(vector, attacker))
	binary.BigEndian.PutUint16(icmp[6:], uint16(ttl))
	icmp = append(icmp, ProbeMarker[:]...)
	icmp = append(icmp, 0, 0, 0, ttl)
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))
	return [][]byte{
		rawIPv4(src, dst, ttl, unix.IPPROTO_ICMP, icmp),
		rawTCP(src, dst, ttl, rawPort(vector, attacker), 179, RawSeq, 0, tcpSYN, nil),
	}
}

// SpoofedEcho is an echo request to p.Dst from the spoofed source p.Outer
// (another endpoint's address: a job it may not reach, say), its payload
// naming the probe at the victim (VTEP 0.0.0.0: no tunnel of the
// attacker's making).
func SpoofedEcho(p Probe) []byte {
	p.VTEP = netip.IPv4Unspecified()
	icmp := make([]byte, 8, 8+28)
	icmp[0] = 8
	binary.BigEndian.PutUint16(icmp[4:], rawPort(VectorSpoofSrc, p.Attacker))
	binary.BigEndian.PutUint16(icmp[6:], 1)
	icmp = append(icmp, probePayload(p)...)
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))
	return rawIPv4(p.Outer, p.Dst, 64, unix.IPPROTO_ICMP, icmp)
}

// SpoofedVXLAN is the crafted VXLAN-GBP packet of VXLANGBPFrame inside an
// IPv4 and UDP header of the attacker's making: from p.Outer (a VTEP the
// target trusts, say) to p.VTEP, port 4789.
func SpoofedVXLAN(p Probe, dstMAC, srcMAC net.HardwareAddr, innerSrc netip.Addr) []byte {
	vx := VXLANGBPFrame(p, dstMAC, srcMAC, innerSrc)
	udp := make([]byte, 8, 8+len(vx))
	binary.BigEndian.PutUint16(udp[0:], rawPort(VectorSpoofVXLAN, p.Attacker))
	binary.BigEndian.PutUint16(udp[2:], 4789)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(vx)))
	udp = append(udp, vx...) // checksum 0: none, as VXLAN senders do
	return rawIPv4(p.Outer, p.VTEP, 64, unix.IPPROTO_UDP, udp)
}

// SendRaw sends each IPv4 packet (header included) from a raw socket
// opened in namespace ns, in order, twice (a first packet may wait for
// ARP and be dropped). It returns how many the kernel took.
func SendRaw(ns string, pkts [][]byte) (int, error) {
	var fd int
	if err := InNetns(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		return 0, fmt.Errorf("raw socket in %s: %w", ns, err)
	}
	defer unix.Close(fd)
	sent := 0
	for round := 0; round < 2; round++ {
		for _, p := range pkts {
			if len(p) < 20 {
				continue
			}
			if err := unix.Sendto(fd, p, 0, &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}); err == nil {
				sent++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sent, nil
}

// Catch is a raw packet (or a switch's answer to one) that the tap saw on
// a switch.
type Catch struct {
	Switch   string
	Iface    string
	Out      bool   // sent on Iface, else received
	Vector   string // spoofed-bgp, ttl, spoofed-vxlan, tunnel-ttl
	Attacker uint16
	Src, Dst netip.Addr // of the packet seen (an answer's, for answers)
	TTL      uint8
	Answer   bool   // the packet is a switch's answer (SYN-ACK, RST, echo reply, ICMP error)
	What     string // "[S] 10.252.1.1:18947 -> 10.252.0.1:179 ttl 255 (spoofed-bgp)", ...
}

func (c Catch) String() string {
	dir := "in on"
	if c.Out {
		dir = "out on"
	}
	return fmt.Sprintf("%s %s %s/%s", c.What, dir, c.Switch, c.Iface)
}

// TapPoint is a switch's underlay namespace and the interfaces whose
// traffic the tap ignores: its server ports, where every attacker's
// packet arrives by construction.
type TapPoint struct {
	Switch string
	Netns  string
	Skip   []string
}

// Tap watches switches' namespaces (a packet socket on every interface of
// each) for raw packets and the answers they draw: seen on a switch
// beyond the server ports means they got past the attacker's leaf port.
type Tap struct {
	mu    sync.Mutex
	got   []Catch
	files []*os.File
	wg    sync.WaitGroup
}

// StartTap starts watching every point.
func StartTap(points []TapPoint) (*Tap, error) {
	t := &Tap{}
	for _, p := range points {
		ready := make(chan error, 1)
		t.wg.Add(1)
		go t.watch(p, ready)
		if err := <-ready; err != nil {
			t.Close()
			return nil, fmt.Errorf("tap on %s: %w", p.Switch, err)
		}
	}
	return t, nil
}

// watch reads one switch's packet socket on a thread that stays in the
// switch's namespace (interface names are looked up there).
func (t *Tap) watch(p TapPoint, ready chan<- error) {
	defer t.wg.Done()
	runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
	fd, err := func() (int, error) {
		nsfd, err := unix.Open(filepath.Join("/run/netns", p.Netns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(nsfd)
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			return -1, err
		}
		proto := htons(unix.ETH_P_ALL)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto))
		if err != nil {
			return -1, err
		}
		// Room for a burst: every switch sees every packet it forwards.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto}); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}()
	if err != nil {
		ready <- err
		return
	}
	f := os.NewFile(uintptr(fd), "tap:"+p.Switch)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		ready <- err
		return
	}
	t.mu.Lock()
	t.files = append(t.files, f)
	t.mu.Unlock()
	ready <- nil
	names := map[int]string{}
	name := func(i int) string {
		if n, ok := names[i]; ok {
			return n
		}
		n := fmt.Sprintf("if%d", i)
		if ifi, err := net.InterfaceByIndex(i); err == nil {
			n = ifi.Name
		}
		names[i] = n
		return n
	}
	buf := make([]byte, 4096)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		}); err != nil || (rerr != nil && rerr != unix.EINTR) {
			return // closed
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Protocol != htons(unix.ETH_P_IP) {
			continue
		}
		c, ok := ClassifyRaw(buf[:n])
		if !ok {
			continue
		}
		c.Switch, c.Iface, c.Out = p.Switch, name(ll.Ifindex), ll.Pkttype == unix.PACKET_OUTGOING
		skip := false
		for _, s := range p.Skip {
			skip = skip || s == c.Iface
		}
		if skip {
			continue
		}
		t.mu.Lock()
		t.got = append(t.got, c)
		t.mu.Unlock()
	}
}

// Catches returns what the tap saw so far.
func (t *Tap) Catches() []Catch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Catch(nil), t.got...)
}

// Close stops the tap.
func (t *Tap) Close() {
	t.mu.Lock()
	for _, f := range t.files {
		f.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// ClassifyRaw says whether an IPv4 packet is one of the raw packets
// (RawID, a vector's port) or a switch's answer to one (a SYN-ACK or RST
// acknowledging RawSeq, an echo reply with the probe marker, an ICMP error
// quoting a raw packet or the marker), and describes it.
func ClassifyRaw(b []byte) (Catch, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return Catch{}, false
	}
	ihl := int(b[0]&0x0f) * 4
	if len(b) < ihl+8 {
		return Catch{}, false
	}
	id := binary.BigEndian.Uint16(b[4:])
	ttl, proto := b[8], b[9]
	src, dst := netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
	l4 := b[ihl:]
	c := Catch{Src: src, Dst: dst, TTL: ttl}
	ours := func(port uint16) bool {
		v := byte(port >> 8)
		if v >= VectorSpoofBGP && v <= VectorSpoofSrc {
			c.Vector, c.Attacker = vectorName(v), port&0xff
			return true
		}
		return false
	}
	switch proto {
	case unix.IPPROTO_TCP:
		if len(l4) < 20 {
			return c, false
		}
		sport, dport := binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		seq, ack := binary.BigEndian.Uint32(l4[4:]), binary.BigEndian.Uint32(l4[8:])
		flags := tcpFlags(l4[13])
		switch {
		case id == RawID && dport == 179 && (seq == RawSeq || seq == RawSeq+1) && ours(sport):
			c.What = fmt.Sprintf("%s %s:%d -> %s:179 ttl %d (%s)", flags, src, sport, dst, ttl, c.Vector)
			return c, true
		case sport == 179 && (ack == RawSeq+1 || ack == RawSeq+1+29) && ours(dport):
			c.Answer = true
			c.What = fmt.Sprintf("answer %s %s:179 -> %s:%d (%s)", flags, src, dst, dport, c.Vector)
			return c, true
		}
	case unix.IPPROTO_ICMP:
		typ := l4[0]
		ident := binary.BigEndian.Uint16(l4[4:])
		switch {
		case (typ == 8 || typ == 0) && len(l4) >= 12 && [4]byte(l4[8:12]) == ProbeMarker && ours(ident):
			kind := "echo request"
			if typ == 0 {
				kind, c.Answer = "echo reply", true
			}
			c.What = fmt.Sprintf("%s %s -> %s ttl %d (%s)", kind, src, dst, ttl, c.Vector)
			return c, true
		case typ == 3 || typ == 11 || typ == 12:
			q := l4[8:]
			if !bytes.Contains(q, ProbeMarker[:]) && !(len(q) >= 20 && binary.BigEndian.Uint16(q[4:]) == RawID) {
				return c, false
			}
			c.Vector, c.Answer = "icmp-error", true
			if port, inner := quotedPort(q); !ours(port) && inner != nil {
				// A tunnel's packet: the raw packet it carries.
				p, _ := quotedPort(inner)
				ours(p)
			}
			c.What = fmt.Sprintf("ICMP type %d code %d %s -> %s (%s)", typ, l4[1], src, dst, c.Vector)
			if len(q) >= 20 {
				c.What = fmt.Sprintf("ICMP type %d code %d %s -> %s quoting %s -> %s (%s)", typ, l4[1], src, dst,
					netip.AddrFrom4([4]byte(q[12:16])), netip.AddrFrom4([4]byte(q[16:20])), c.Vector)
			}
			return c, true
		}
	case unix.IPPROTO_UDP:
		sport, dport := binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		if id == RawID && dport == 4789 && ours(sport) {
			c.What = fmt.Sprintf("VXLAN %s -> %s ttl %d (%s)", src, dst, ttl, c.Vector)
			return c, true
		}
	}
	return c, false
}

// quotedPort is the source port (TCP, UDP) or echo identifier (ICMP) of
// the IPv4 packet an ICMP error quotes and, when that packet is VXLAN,
// the inner IPv4 packet.
func quotedPort(q []byte) (port uint16, inner []byte) {
	if len(q) < 28 || q[0]>>4 != 4 {
		return 0, nil
	}
	qi := int(q[0]&0x0f) * 4
	if len(q) < qi+8 {
		return 0, nil
	}
	switch q[9] {
	case unix.IPPROTO_TCP:
		return binary.BigEndian.Uint16(q[qi:]), nil
	case unix.IPPROTO_UDP:
		if binary.BigEndian.Uint16(q[qi+2:]) == 4789 && len(q) >= qi+8+8+14+28 && binary.BigEndian.Uint16(q[qi+8+8+12:]) == 0x0800 {
			inner = q[qi+8+8+14:]
		}
		return binary.BigEndian.Uint16(q[qi:]), inner
	case unix.IPPROTO_ICMP:
		return binary.BigEndian.Uint16(q[qi+4:]), nil
	}
	return 0, nil
}

func tcpFlags(f byte) string {
	var s []byte
	for _, x := range []struct {
		bit byte
		c   byte
	}{{tcpSYN, 'S'}, {tcpACK, 'A'}, {tcpPSH, 'P'}, {tcpRST, 'R'}, {tcpFIN, 'F'}} {
		if f&x.bit != 0 {
			s = append(s, x.c)
		}
	}
	return "[" + string(s) + "]"
}
