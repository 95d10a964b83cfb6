package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The attacker's tools: what a root user on a server can do from its NIC
// (an endpoint's namespace) to the leaf it is cabled to and, through it,
// to the fabric. The adversarial test (adversarial_test.go) uses them to
// prove that nothing gets through; nothing here configures the fabric.

// InNetns runs fn on an OS thread that has entered the network namespace
// named ns (under /run/netns). Sockets fn opens stay in that namespace
// after it returns. The thread is never handed back to the Go scheduler:
// it ends with fn's goroutine, so no other goroutine runs in ns.
func InNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// ProbeMarker starts the payload of every echo request the injector
// crafts; the victims' listeners count only packets carrying it.
var ProbeMarker = [4]byte{'J', 'F', 'A', 'T'}

// Probe identifies one crafted packet: who sent it, through which VTEP,
// with which VNI and group, to which victim address.
type Probe struct {
	Attacker uint16     // index into the test's attacker list
	VTEP     netip.Addr // outer destination
	VNI      uint32
	Group    uint16
	Dst      netip.Addr // inner destination (the victim)
	// Outer is the spoofed outer source of a packet sent from a raw
	// socket (SpoofedVXLAN); invalid when the kernel chose the source.
	Outer netip.Addr
}

func (p Probe) String() string {
	s := fmt.Sprintf("VNI %d group %d via %s to %s", p.VNI, p.Group, p.VTEP, p.Dst)
	if p.Outer.IsValid() {
		s += " from spoofed " + p.Outer.String()
	}
	return s
}

// probePayload is the echo payload: marker, attacker, VNI, group, VTEP,
// destination (IPv4), spoofed outer source (0.0.0.0 for none) - enough to
// name the probe at the victim.
func probePayload(p Probe) []byte {
	b := make([]byte, 0, 24)
	b = append(b, ProbeMarker[:]...)
	b = binary.BigEndian.AppendUint16(b, p.Attacker)
	b = binary.BigEndian.AppendUint32(b, p.VNI)
	b = binary.BigEndian.AppendUint16(b, p.Group)
	v, d := p.VTEP.As4(), p.Dst.As4()
	b = append(b, v[:]...)
	b = append(b, d[:]...)
	var o [4]byte
	if p.Outer.Is4() {
		o = p.Outer.As4()
	}
	return append(b, o[:]...)
}

func parseProbePayload(b []byte) (Probe, bool) {
	if len(b) < 24 || [4]byte(b[:4]) != ProbeMarker {
		return Probe{}, false
	}
	p := Probe{
		Attacker: binary.BigEndian.Uint16(b[4:]),
		VNI:      binary.BigEndian.Uint32(b[6:]),
		Group:    binary.BigEndian.Uint16(b[10:]),
		VTEP:     netip.AddrFrom4([4]byte(b[12:16])),
		Dst:      netip.AddrFrom4([4]byte(b[16:20])),
	}
	if o := netip.AddrFrom4([4]byte(b[20:24])); !o.IsUnspecified() {
		p.Outer = o
	}
	return p, true
}

// VXLANGBPFrame builds the UDP payload of a VXLAN packet with the
// group-based policy extension (draft-smith-vxlan-group-policy: the G
// bit, the 16-bit group policy ID, the 24-bit VNI) carrying an Ethernet
// frame to dstMAC (the VTEP's router MAC) with an IPv4 ICMP echo request
// from src to the probe's destination.
func VXLANGBPFrame(p Probe, dstMAC, srcMAC net.HardwareAddr, src netip.Addr) []byte {
	icmp := make([]byte, 8, 8+28)
	icmp[0] = 8 // echo request
	binary.BigEndian.PutUint16(icmp[4:], 0x4a46)
	binary.BigEndian.PutUint16(icmp[6:], 1)
	icmp = append(icmp, probePayload(p)...)
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))

	ip := make([]byte, 20, 20+len(icmp))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
	binary.BigEndian.PutUint16(ip[4:], 0x4a46)
	ip[8] = 64 // TTL
	ip[9] = 1  // ICMP
	s, d := src.As4(), p.Dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	ip = append(ip, icmp...)

	vx := make([]byte, 8, 8+14+len(ip))
	vx[0] = 0x88 // G (group policy) and I (VNI valid)
	binary.BigEndian.PutUint16(vx[2:], p.Group)
	vx[4], vx[5], vx[6] = byte(p.VNI>>16), byte(p.VNI>>8), byte(p.VNI)
	vx = append(vx, dstMAC...)
	vx = append(vx, srcMAC...)
	vx = append(vx, 0x08, 0x00)
	return append(vx, ip...)
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Frame is one crafted VXLAN packet and where it goes.
type Frame struct {
	Probe   Probe
	Payload []byte // the UDP payload (VXLAN header and inner frame)
}

// SendVXLAN sends every frame as a UDP datagram to its VTEP, port 4789,
// from a socket opened in namespace ns, twice (a first packet may wait
// for ARP and be dropped). It returns how many datagrams the kernel took;
// a datagram refused with "no route" or "unreachable" counts as sent.
func SendVXLAN(ns string, frames []Frame) (int, error) {
	var conn *net.UDPConn
	if err := InNetns(ns, func() error {
		c, err := net.ListenUDP("udp4", nil)
		conn = c
		return err
	}); err != nil {
		return 0, err
	}
	defer conn.Close()
	sent := 0
	for round := 0; round < 2; round++ {
		for _, f := range frames {
			dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.Probe.VTEP, 4789))
			if _, err := conn.WriteToUDP(f.Payload, dst); err == nil {
				sent++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sent, nil
}

// Delivery is a crafted echo request that arrived at a victim's NIC.
type Delivery struct {
	Victim string // endpoint name
	Probe  Probe
}

// Listener counts crafted echo requests arriving at the NICs of a set of
// endpoints (a packet socket on each endpoint's interface, in its
// namespace): arriving there means the packet crossed the fabric.
type Listener struct {
	mu    sync.Mutex
	got   []Delivery
	files []*os.File
	wg    sync.WaitGroup
}

// Listen starts counting at every endpoint in eps.
func Listen(eps []Endpoint) (*Listener, error) {
	l := &Listener{}
	for _, ep := range eps {
		var fd int
		err := InNetns(ep.Netns, func() error {
			ifi, err := net.InterfaceByName(ep.Iface)
			if err != nil {
				return err
			}
			proto := int(htons(unix.ETH_P_IP))
			fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
			if err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}); err != nil {
				unix.Close(fd)
				return err
			}
			return nil
		})
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("listen on %s: %w", ep.Name(), err)
		}
		f := os.NewFile(uintptr(fd), "packet:"+ep.Name())
		l.files = append(l.files, f)
		l.wg.Add(1)
		go l.read(f, ep.Name())
	}
	return l, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (l *Listener) read(f *os.File, victim string) {
	defer l.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return // closed
		}
		b := buf[:n]
		if n < 20 || b[0]>>4 != 4 || b[9] != 1 {
			continue
		}
		ihl := int(b[0]&0x0f) * 4
		if n < ihl+8 || b[ihl] != 8 {
			continue // not an echo request
		}
		if p, ok := parseProbePayload(b[ihl+8:]); ok {
			l.mu.Lock()
			l.got = append(l.got, Delivery{Victim: victim, Probe: p})
			l.mu.Unlock()
		}
	}
}

// Deliveries returns what arrived so far.
func (l *Listener) Deliveries() []Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Delivery(nil), l.got...)
}

// Close stops listening.
func (l *Listener) Close() {
	for _, f := range l.files {
		f.Close()
	}
	l.wg.Wait()
}

// TCPConnect tries a TCP connection from namespace ns to addr (an
// address and port; an IPv6 link-local address needs its zone, the
// interface in ns) and reports whether the handshake completed.
func TCPConnect(ctx context.Context, ns string, addr netip.AddrPort, zone string, timeout time.Duration) (bool, error) {
	ok := false
	err := InNetns(ns, func() error {
		a := net.TCPAddrFromAddrPort(addr)
		if zone != "" {
			a.Zone = zone
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(cctx, "tcp", a.String())
		if err == nil {
			ok = true
			c.Close()
		}
		return nil
	})
	return ok, err
}

// EchoRepliers pings dst (an address, with %zone for link-local and
// multicast) from namespace ns count times and returns the addresses that
// answered, other than the namespace's own.
func EchoRepliers(ctx context.Context, ns, dst string, count int, wait time.Duration) ([]string, error) {
	args := []string{"netns", "exec", ns, "ping", "-n", "-c", strconv.Itoa(count), "-i", "0.2",
		"-W", strconv.FormatFloat(wait.Seconds(), 'f', 2, 64)}
	if a, err := netip.ParseAddr(strings.Split(dst, "%")[0]); err == nil && a.Is6() {
		args = append(args, "-6")
	}
	out, err := exec.CommandContext(ctx, "ip", append(args, dst)...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, err
	}
	own, err := ownAddrs(ctx, ns)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var from []string
	for _, line := range strings.Split(string(out), "\n") {
		// "64 bytes from fe80::1%eth0: icmp_seq=1 ttl=64 time=0.1 ms"
		_, rest, ok := strings.Cut(line, " bytes from ")
		if !ok {
			continue
		}
		a, _, _ := strings.Cut(rest, ": ")
		a = strings.TrimSuffix(a, ":")
		if base := strings.Split(a, "%")[0]; own[base] || seen[base] {
			continue
		} else {
			seen[base] = true
			from = append(from, base)
		}
	}
	return from, nil
}

// ownAddrs are the addresses of namespace ns.
func ownAddrs(ctx context.Context, ns string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-o", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -n %s addr show: %w", ns, err)
	}
	own := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				a, _, _ := strings.Cut(f[i+1], "/")
				own[a] = true
			}
		}
	}
	return own, nil
}

// PortInfo is what an attacker on a server can learn about the leaf port
// at the other end of its cable (its MAC from ARP or neighbour discovery,
// its link-local address from router or neighbour advertisements): here
// read from the leaf's namespaces.
type PortInfo struct {
	Netns     string // where the port is now: the leaf's underlay or one of its VRFs
	MAC       net.HardwareAddr
	LinkLocal netip.Addr // invalid when the port has none (down, or IPv6 off)
	Up        bool
}

// LeafPort finds endpoint ep's leaf port in the leaf's namespaces.
func (l *Lab) LeafPort(ctx context.Context, ep *Endpoint) (*PortInfo, error) {
	d := l.Device(ep.Leaf)
	if d == nil {
		return nil, fmt.Errorf("no leaf %s", ep.Leaf)
	}
	cands := []string{d.Netns}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), d.VRFNetnsPrefix()) {
			cands = append(cands, e.Name())
		}
	}
	for _, ns := range cands {
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-o", "link", "show", "dev", ep.Port).Output()
		if err != nil {
			continue
		}
		pi := &PortInfo{Netns: ns}
		f := strings.Fields(string(out))
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "link/ether" {
				pi.MAC, _ = net.ParseMAC(f[i+1])
			}
		}
		pi.Up = strings.Contains(f[2], ",UP") || strings.Contains(f[2], "<UP")
		out, err = exec.CommandContext(ctx, "ip", "-n", ns, "-6", "-o", "addr", "show", "dev", ep.Port, "scope", "link").Output()
		if err == nil {
			for _, w := range strings.Fields(string(out)) {
				if p, err := netip.ParsePrefix(w); err == nil && p.Addr().IsLinkLocalUnicast() {
					pi.LinkLocal = p.Addr()
				}
			}
		}
		if !pi.LinkLocal.IsValid() && len(pi.MAC) == 6 {
			// A port that is down has no link-local address; the one it
			// would have (EUI-64, Linux's default) follows from its MAC.
			pi.LinkLocal = eui64LinkLocal(pi.MAC)
		}
		return pi, nil
	}
	return nil, fmt.Errorf("port %s of %s is in none of the leaf's namespaces", ep.Port, ep.Leaf)
}

// eui64LinkLocal is the fe80::/64 address Linux derives from a MAC.
func eui64LinkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
	a[11], a[12] = 0xff, 0xfe
	a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(a)
}
