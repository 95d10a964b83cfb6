package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// recorded answers show commands from recorded output files: the test
// double of a switch, read by the real parser.
type recorded struct {
	files map[string]string // command -> testdata file
	asked []string
}

func (r *recorded) Show(_ context.Context, device, cmd string) (string, error) {
	r.asked = append(r.asked, device+": "+cmd)
	f, ok := r.files[cmd]
	if !ok {
		return "", errors.New("no recording of " + cmd)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "nxos", f))
	return string(b), err
}

// counting is a driver that counts what reaches it.
type counting struct{ applied []string }

func (c *counting) Name() string { return "counting" }
func (c *counting) Apply(_ context.Context, d deploy.Device) error {
	c.applied = append(c.applied, d.Name)
	return nil
}

func rendered(t *testing.T, nos, model, device string, opts render.Options) deploy.Device {
	t.Helper()
	in, err := fabrictest.Input(nos, model)
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	files, err := opts.Render(it.Device(device), "")
	if err != nil {
		t.Fatal(err)
	}
	return deploy.Device{Name: device, NOS: nos, Rev: 1, Hash: "h", Files: files}
}

// TestNXOSSecurityGroupPrerequisite: a segmented NX-OS leaf is applied
// only when the switch runs the security-groups routing template; else
// the condition says what to do, and nothing reaches the switch.
func TestNXOSSecurityGroupPrerequisite(t *testing.T) {
	tests := []struct {
		recording  string
		ok         bool
		reason     string
		wantErrMsg string
	}{
		{"routing-mode-applied.txt", true, "Applied", ""},
		{"routing-mode-reload-pending.txt", false, "ReloadRequired", "save and reload the switch"},
		{"routing-mode-default.txt", false, "NotConfigured", "configure `system routing template-security-groups`"},
		{"routing-mode-unknown.txt", false, "", "without its Configured and Applied"},
	}
	d := rendered(t, "nxos", fabrictest.Segmented, "s1-leaf1", render.Options{})
	for _, tc := range tests {
		t.Run(tc.recording, func(t *testing.T) {
			sw := &recorded{files: map[string]string{"show system routing mode": tc.recording}}
			drv := &counting{}
			c := &deploy.Checked{Driver: drv, Show: sw}
			conds, err := c.ApplyConditions(context.Background(), d)
			if tc.ok {
				if err != nil || len(drv.applied) != 1 {
					t.Fatalf("prepared switch: err %v, applied %v", err, drv.applied)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrMsg) || len(drv.applied) != 0 {
					t.Fatalf("unprepared switch: err %v (want %q), applied %v", err, tc.wantErrMsg, drv.applied)
				}
				var pe *deploy.PrerequisiteError
				if tc.reason != "" && !errors.As(err, &pe) {
					t.Fatalf("err %T, want a PrerequisiteError", err)
				}
			}
			if tc.reason != "" && (len(conds) != 1 || conds[0].Type != domain.SwitchSecurityGroupsTemplate || conds[0].Reason != tc.reason || conds[0].OK != tc.ok) {
				t.Errorf("conditions %+v, want one %s %s ok=%v", conds, domain.SwitchSecurityGroupsTemplate, tc.reason, tc.ok)
			}
		})
	}
	// A leaf without security groups asks the switch nothing.
	sw := &recorded{}
	if _, err := (&deploy.Checked{Driver: &counting{}, Show: sw}).ApplyConditions(context.Background(), rendered(t, "nxos", fabrictest.PureRT5, "s1-leaf0", render.Options{})); err != nil || len(sw.asked) != 0 {
		t.Errorf("unsegmented leaf: err %v, asked %v", err, sw.asked)
	}
}

// TestCheckedLintsEveryDeploy: a configuration the lint refuses never
// reaches the driver, whichever driver it is.
func TestCheckedLintsEveryDeploy(t *testing.T) {
	d := rendered(t, "junos", fabrictest.VLANAware, "s1-leaf0", render.Options{})
	drv := &counting{}
	c := &deploy.Checked{Driver: drv}
	if err := c.Apply(context.Background(), d); err != nil {
		t.Fatalf("a clean render: %v", err)
	}
	// The MAC-VRF of a leaf without the tenant's VLANs (the render no
	// longer writes it; an edited or older render might).
	bad := d
	bad.Files = []render.File{{Name: "junos.set", Content: d.Files[0].Content + "set routing-instances t-mac instance-type mac-vrf\n"}}
	err := c.Apply(context.Background(), bad)
	var le *deploy.LintError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "must configure bridge-domain for mac-vrf instance") {
		t.Fatalf("err %v, want a lint error naming the commit failure", err)
	}
	if len(drv.applied) != 1 {
		t.Errorf("the refused configuration reached the driver: %v", drv.applied)
	}
	// The switch's inventory entry gives the platform rules: a port its
	// model lacks is refused before the driver sees it.
	onModel := d
	onModel.Switch = &domain.Switch{Name: d.Name, NOS: "junos", Platform: &domain.Platform{Vendor: "juniper", Model: "QFX5220-32CD", Version: "23.4R1-EVO"}}
	if err := c.Apply(context.Background(), onModel); err != nil {
		t.Fatalf("a clean render on its model: %v", err)
	}
	onModel.Files = []render.File{{Name: "junos.set", Content: d.Files[0].Content + "set interfaces et-0/0/40 description \"past the last port\"\n"}}
	if err := c.Apply(context.Background(), onModel); !errors.As(err, &le) || !strings.Contains(err.Error(), "et-0/0/40") {
		t.Errorf("a port the model lacks: err %v, want a lint error naming it", err)
	}
	if len(drv.applied) != 2 {
		t.Errorf("the driver applied %d configurations, want the 2 clean ones", len(drv.applied))
	}
	// Hooks given to the driver win.
	c.Hooks = lint.Hooks{Feature: func(dev, f string) error { return errors.New("not on this release") }}
	if err := c.Apply(context.Background(), d); err == nil || !strings.Contains(err.Error(), lint.FeatureJunosMACVRF) {
		t.Errorf("a feature the platform lacks: err %v", err)
	}
}

// TestDisruptionsSaySo: adding overlay-ecmp is reported as a forwarding
// restart; a deploy that already had it is not.
func TestDisruptionsSaySo(t *testing.T) {
	caps := render.Options{Caps: func(*fabric.Device) render.Caps { return render.Caps{OverlayECMP: true} }}
	d := rendered(t, "junos", fabrictest.PureRT5, "s1-leaf0", caps)
	conds, err := (&deploy.Checked{Driver: &counting{}}).ApplyConditions(context.Background(), d)
	if err != nil || len(conds) != 1 || conds[0].Type != domain.SwitchForwardingRestart || !strings.Contains(conds[0].Message, "restarts the forwarding engine") {
		t.Fatalf("first deploy with overlay-ecmp: err %v, conditions %+v", err, conds)
	}
	d.Previous = d.Files
	if conds := deploy.Disruptions(d); len(conds) != 0 {
		t.Errorf("overlay-ecmp already running: %+v", conds)
	}
	// The GBP profile, on a segmented leaf of a platform that needs it.
	gbp := render.Options{Caps: func(*fabric.Device) render.Caps { return render.Caps{GBP: true, GBPProfile: true} }}
	d = rendered(t, "junos", fabrictest.Segmented, "s1-leaf1", gbp)
	if conds := deploy.Disruptions(d); len(conds) != 1 || !strings.Contains(conds[0].Message, "vxlan-gbp-profile") {
		t.Errorf("first deploy with the GBP profile: %+v", conds)
	}
}

// TestBreakoutIsDisruptive: a deploy that adds or changes a port breakout
// says so (the switch re-lays the ports); one that keeps it does not.
func TestBreakoutIsDisruptive(t *testing.T) {
	file := func(name, content string) []render.File { return []render.File{{Name: name, Content: content}} }
	for _, tc := range []struct {
		name, nos, file, prev, next string
		want                        bool
	}{
		{"nxos added", render.NXOS, "leaf.cfg", "hostname leaf\n", "hostname leaf\ninterface breakout module 1 port 3 map 100g-4x\n", true},
		{"nxos kept", render.NXOS, "leaf.cfg", "interface breakout module 1 port 3 map 100g-4x\n", "interface breakout module 1 port 3 map 100g-4x\n", false},
		{"nxos changed", render.NXOS, "leaf.cfg", "interface breakout module 1 port 3 map 100g-4x\n", "interface breakout module 1 port 3 map 200g-2x\n", true},
		{"junos evolved added", render.Junos, "leaf.set", "", "set interfaces et-0/0/4 number-of-sub-ports 4\n", true},
		{"junos chassis kept", render.Junos, "leaf.set", "set chassis fpc 0 pic 0 port 4 channel-speed 25g\n", "set chassis fpc 0 pic 0 port 4 channel-speed 25g\n", false},
		{"eos added", render.EOS, "leaf.cfg", "interface Ethernet5/1\n", "interface Ethernet5/1\n   speed 200g-2\n", true},
		{"sonic added", render.SONiC, "config_db.json", "{}\n", "{\n  \"BREAKOUT_CFG\": {\n    \"Ethernet0\": {\n      \"brkout_mode\": \"4x200G[100G,50G,25G,10G]\"\n    }\n  }\n}\n", true},
		{"no breakout", render.EOS, "leaf.cfg", "", "interface Ethernet1/1\n", false},
	} {
		d := deploy.Device{Name: "leaf", NOS: tc.nos, Files: file(tc.file, tc.next), Previous: file(tc.file, tc.prev)}
		var got bool
		for _, c := range deploy.Disruptions(d) {
			got = got || c.Type == domain.SwitchPortBreakout
		}
		if got != tc.want {
			t.Errorf("%s: PortBreakout %v, want %v (%+v)", tc.name, got, tc.want, deploy.Disruptions(d))
		}
	}
}
