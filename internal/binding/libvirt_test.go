package binding_test

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// hostdevSchema mirrors the elements and attributes libvirt's domain
// schema (domaincommon.rng: hostdev, source, address with pciDomain,
// pciBus, pciSlot, pciFunc) allows for a PCI subsystem hostdev; the ",any"
// fields catch anything else.
type hostdevSchema struct {
	XMLName  xml.Name `xml:"devices"`
	Hostdevs []struct {
		Mode    string     `xml:"mode,attr"`
		Type    string     `xml:"type,attr"`
		Managed string     `xml:"managed,attr"`
		Extra   []xml.Attr `xml:",any,attr"`
		Source  *struct {
			Address *struct {
				Domain   string     `xml:"domain,attr"`
				Bus      string     `xml:"bus,attr"`
				Slot     string     `xml:"slot,attr"`
				Function string     `xml:"function,attr"`
				Extra    []xml.Attr `xml:",any,attr"`
			} `xml:"address"`
			Other []xml.Name `xml:",any"`
		} `xml:"source"`
		Alias *struct {
			Name string `xml:"name,attr"`
		} `xml:"alias"`
		Other []xml.Name `xml:",any"`
	} `xml:"hostdev"`
	Other []xml.Name `xml:",any"`
}

// The patterns of domaincommon.rng's pciDomain, pciBus, pciSlot, pciFunc
// and of a user alias.
var (
	pciDomain = regexp.MustCompile(`^(0x)?[0-9a-fA-F]{1,4}$`)
	pciBus    = regexp.MustCompile(`^(0x)?[0-9a-fA-F]{1,2}$`)
	pciSlot   = regexp.MustCompile(`^(0x)?[0-1]?[0-9a-fA-F]$`)
	pciFunc   = regexp.MustCompile(`^(0x)?[0-7]$`)
	userAlias = regexp.MustCompile(`^ua-[a-zA-Z0-9_-]+$`)
)

// checkHostdevs parses x and returns its PCI addresses (sysfs form) and
// every way it leaves libvirt's schema.
func checkHostdevs(t *testing.T, x []byte) []string {
	t.Helper()
	var d hostdevSchema
	if err := xml.Unmarshal(x, &d); err != nil {
		t.Fatalf("libvirt output does not parse: %v\n%s", err, x)
	}
	if len(d.Other) > 0 {
		t.Errorf("elements other than hostdev in <devices>: %v", d.Other)
	}
	var addrs []string
	aliases := map[string]bool{}
	for i, h := range d.Hostdevs {
		if h.Mode != "subsystem" || h.Type != "pci" || h.Managed != "yes" || len(h.Extra) > 0 || len(h.Other) > 0 {
			t.Errorf("hostdev %d: mode=%q type=%q managed=%q extra=%v %v", i, h.Mode, h.Type, h.Managed, h.Extra, h.Other)
		}
		if h.Source == nil || h.Source.Address == nil || len(h.Source.Other) > 0 {
			t.Errorf("hostdev %d has no <source><address>", i)
			continue
		}
		a := h.Source.Address
		if !pciDomain.MatchString(a.Domain) || !pciBus.MatchString(a.Bus) || !pciSlot.MatchString(a.Slot) || !pciFunc.MatchString(a.Function) || len(a.Extra) > 0 {
			t.Errorf("hostdev %d: address %+v leaves libvirt's pci address patterns", i, *a)
		}
		if h.Alias == nil || !userAlias.MatchString(h.Alias.Name) || aliases[h.Alias.Name] {
			t.Errorf("hostdev %d: alias %+v is not a unique user alias (ua-...)", i, h.Alias)
		} else {
			aliases[h.Alias.Name] = true
		}
		var dom, bus, slot, fn int
		fmt.Sscanf(a.Domain+" "+a.Bus+" "+a.Slot+" "+a.Function, "0x%x 0x%x 0x%x 0x%x", &dom, &bus, &slot, &fn)
		addrs = append(addrs, fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, slot, fn))
	}
	return addrs
}

// sysfsForm turns nvidia-smi's 00000000:53:00.0 into 0000:53:00.0.
func sysfsForm(bus string) string {
	a, err := binding.ParsePCIBusID(bus)
	if err != nil {
		panic(err)
	}
	return a.String()
}

func TestLibvirtPassthroughFromRecordedFacts(t *testing.T) {
	// The recorded H100 (nvidia-smi -q, ibstat, sysfs); its sysfs record
	// has no device links, so the NICs' PCI functions are set here as the
	// agent reads them from /sys/class/infiniband/mlx5_N/device.
	h := host(t, "h100-ib")
	for i := range h.Facts.NICs {
		h.Facts.NICs[i].PCIBusID = fmt.Sprintf("0000:%02x:00.0", 0x1a+0x10*i)
	}
	in := binding.Input{Job: job(42, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{5, 4}}), Node: "gpu-a1",
		Server: h100Server(), RailOptimized: true, Host: h, Fabric: binding.Identity{Tenant: "acme", Workspace: "research"}}
	b, err := binding.Bind(in)
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.LibvirtXML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "h100-passthrough.libvirt.xml.golden", x)
	got := checkHostdevs(t, x)
	// The addresses are the recorded ones: GPUs 4 and 5 as nvidia-smi
	// reported them, then the NICs of their rails.
	var want []string
	for _, gi := range []int{4, 5} {
		for _, g := range h.Facts.GPUs {
			if g.Index == gi {
				want = append(want, sysfsForm(g.PCIBusID))
			}
		}
	}
	for _, n := range b.NICs {
		want = append(want, sysfsForm(n.PCIBusID))
	}
	if len(b.NICs) != 2 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("hostdev addresses %v, want %v (GPUs 4, 5 then their %d rail NICs)", got, want, len(b.NICs))
	}
}

func TestLibvirtRefusesWhatAVMCannotTake(t *testing.T) {
	bind := func(t *testing.T, in binding.Input) *binding.Binding {
		t.Helper()
		b, err := binding.Bind(in)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, c := range map[string]struct {
		in   func(t *testing.T) binding.Input
		want []string
	}{
		"recorded-facts-without-nic-addresses": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(42, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{0}}), Node: "gpu-a1", Server: h100Server(), Host: host(t, "h100-ib")}
		}, want: []string{"NIC eth0 (mlx5_0, rail 0)", "gpu-a1", "pciBusId", "/sys/class/infiniband/mlx5_0/device"}},
		"gpu-address-unknown": {in: func(t *testing.T) binding.Input {
			h := host(t, "h100-ib")
			for i := range h.Facts.GPUs {
				if h.Facts.GPUs[i].Index == 3 {
					h.Facts.GPUs[i].PCIBusID = ""
				}
			}
			return binding.Input{Job: job(42, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{3}}), Node: "gpu-a1", Server: h100Server(), Host: h}
		}, want: []string{"GPU 3 (GPU-", "PCI address unknown", "Bus Id"}},
		"no-agent-yet": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(44, "acme", domain.Placement{Server: "gpu-a1", GPUs: []int{6}}), Node: "gpu-a1", Server: h100Server()}
		}, want: []string{"GPU 6 (UUID unknown)", "PCI address unknown"}},
		"mig-instances": {in: func(t *testing.T) binding.Input {
			return binding.Input{Job: job(7, "globex", domain.Placement{Server: "gpu-a1", GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "1g.20gb", Start: 4}}}),
				Node: "gpu-a1", Server: a100Server(), Host: host(t, "a100-mig")}
		}, want: []string{"MIG instance 1g.20gb", "whole GPUs"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bind(t, c.in(t)).LibvirtXML()
			if err == nil {
				t.Fatal("libvirt hostdevs written, want a refusal")
			}
			if de, ok := err.(*domain.Error); !ok || de.Code != domain.CodeFailedPrecondition {
				t.Errorf("err %T %v, want a failed_precondition domain error", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestParsePCIBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:53:00.0": "0000:53:00.0",
		"0000:4b:00.1":     "0000:4b:00.1",
		"1b:1f.7":          "0000:1b:1f.7",
		"0001:AB:02.3":     "0001:ab:02.3",
		"00010000:53:00.0": "error",
		"0000:53:20.0":     "error",
		"0000:53:00.8":     "error",
		"53:00":            "error",
		"":                 "error",
	} {
		a, err := binding.ParsePCIBusID(in)
		got := a.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("ParsePCIBusID(%q) = %s (%v), want %s", in, got, err, want)
		}
	}
}
