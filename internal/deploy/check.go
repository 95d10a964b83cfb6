package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// Shower runs a show command on a switch and returns its text output. A
// driver that talks to switches (SSH, NX-API CLI, eAPI, NETCONF) provides
// it; tests give it recorded output.
type Shower interface {
	Show(ctx context.Context, device, command string) (string, error)
}

// Checked wraps a driver with what every deploy checks first: the
// semantic lint of the device's configuration (internal/fabric/lint), and,
// when Show can ask the switch, the preparations the configuration needs
// that no configuration line can make (an NX-OS routing template applied
// with a reload). A device failing either is not applied; the error says
// which rule or condition, and Conditions (also on success) say what the
// server records for the switch.
type Checked struct {
	Driver Driver
	// Show asks the switch; nil (the file driver: no switch to ask) skips
	// the prerequisite checks, not the lint.
	Show Shower
	// Hooks are the platform rules of the lint (interface names,
	// per-feature minimum versions); unset, each device's come from its
	// inventory entry (Device.Switch, render.SwitchLintHooks).
	Hooks lint.Hooks
}

// Name implements Driver.
func (c *Checked) Name() string { return c.Driver.Name() }

// LintError is a configuration the lint refuses.
type LintError struct {
	Device   string
	Findings []lint.Finding
}

func (e *LintError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "device %s: the configuration breaks %d lint rule(s), not applied:", e.Device, len(e.Findings))
	for i, f := range e.Findings {
		if i == 5 {
			fmt.Fprintf(&b, " ... (%d more)", len(e.Findings)-5)
			break
		}
		b.WriteString(" " + f.String() + ";")
	}
	return b.String()
}

// PrerequisiteError is a switch not prepared for its configuration.
type PrerequisiteError struct {
	Device     string
	Conditions []domain.SwitchCondition
}

func (e *PrerequisiteError) Error() string {
	var msgs []string
	for _, c := range e.Conditions {
		if !c.OK {
			msgs = append(msgs, c.Type+": "+c.Message)
		}
	}
	return fmt.Sprintf("device %s is not prepared for its configuration, not applied: %s", e.Device, strings.Join(msgs, "; "))
}

// Apply implements Driver: lint, prerequisites, then the wrapped driver.
func (c *Checked) Apply(ctx context.Context, d Device) error {
	_, err := c.ApplyConditions(ctx, d)
	return err
}

// ApplyConditions is Apply that also returns the switch's conditions: the
// prerequisites found (met or not) and the disruptions the configuration
// causes against d.Previous.
func (c *Checked) ApplyConditions(ctx context.Context, d Device) ([]domain.SwitchCondition, error) {
	h := c.Hooks
	if h.InterfaceName == nil && h.Feature == nil && d.Switch != nil {
		h = render.SwitchLintHooks(*d.Switch)
	}
	if fs := Lint(d, h); len(fs) > 0 {
		return nil, &LintError{Device: d.Name, Findings: fs}
	}
	var conds []domain.SwitchCondition
	if c.Show != nil {
		var err error
		if conds, err = Prerequisites(ctx, c.Show, d); err != nil {
			return nil, fmt.Errorf("device %s: checking prerequisites: %w", d.Name, err)
		}
		for _, cd := range conds {
			if !cd.OK {
				return conds, &PrerequisiteError{Device: d.Name, Conditions: conds}
			}
		}
	}
	disrupt := Disruptions(d)
	if err := c.Driver.Apply(ctx, d); err != nil {
		return conds, err
	}
	return append(conds, disrupt...), nil
}

// Lint runs the per-NOS lint on one device's files.
func Lint(d Device, h lint.Hooks) []lint.Finding {
	return lint.Device(lintConfig(d.Name, d.NOS, d.Files), h)
}

func lintConfig(name, nos string, files []render.File) lint.Config {
	c := lint.Config{Device: name, NOS: nos}
	for _, f := range files {
		c.Files = append(c.Files, lint.File{Name: f.Name, Content: f.Content})
	}
	return c
}

// Prerequisites asks the switch about what d's configuration needs
// prepared. NX-OS: `feature security-group` is refused unless `system
// routing template-security-groups` was configured and the switch
// reloaded since; `show system routing mode` says which template is
// configured and which one the running system applies. Cisco,
// "Microsegmentation for VXLAN fabrics using GPO", prerequisites, and
// "Configure and validate GPO in VXLAN" step 2 (verify the system routing
// mode):
// https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/106x/configuration/vxlan/cisco-nexus-9000-series-nx-os-vxlan-configuration-guide-release-106x/microsegmentation_for_vxlan_fabrics_using_gpo.html
// https://www.cisco.com/c/en/us/support/docs/data-center-networking/nexus-dashboard/226081-configure-and-validate-gpo-in-vxlan.html
func Prerequisites(ctx context.Context, sh Shower, d Device) ([]domain.SwitchCondition, error) {
	if d.NOS != render.NXOS || !hasLine(d.Files, "feature security-group") {
		return nil, nil
	}
	out, err := sh.Show(ctx, d.Name, "show system routing mode")
	if err != nil {
		return nil, err
	}
	mode, err := ParseRoutingMode(out)
	if err != nil {
		return nil, err
	}
	c := domain.SwitchCondition{Type: domain.SwitchSecurityGroupsTemplate, OK: true, Reason: "Applied",
		Message: fmt.Sprintf("routing mode %q is applied", mode.Applied)}
	switch {
	case !mode.securityGroups(mode.Configured):
		c.OK, c.Reason = false, "NotConfigured"
		c.Message = fmt.Sprintf("the configuration uses security groups; configure `system routing template-security-groups`, save, and reload the switch (configured routing mode: %q)", mode.Configured)
	case !mode.securityGroups(mode.Applied):
		c.OK, c.Reason = false, "ReloadRequired"
		c.Message = fmt.Sprintf("`system routing template-security-groups` is configured but not applied (running %q): save and reload the switch", mode.Applied)
	}
	return []domain.SwitchCondition{c}, nil
}

// RoutingMode is what `show system routing mode` says.
type RoutingMode struct {
	Configured, Applied string
}

func (RoutingMode) securityGroups(mode string) bool {
	m := strings.ToLower(mode)
	return strings.Contains(m, "security-group") || strings.Contains(m, "security group")
}

// ParseRoutingMode reads `show system routing mode`: a "Configured System
// Routing Mode:" line and an "Applied System Routing Mode:" line (with the
// template applied: "Security-Groups Support"). Output without both is an
// error, never a pass: a switch that did not answer the question has not
// shown it is prepared.
func ParseRoutingMode(out string) (RoutingMode, error) {
	var m RoutingMode
	var haveC, haveA bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "configured system routing mode":
			m.Configured, haveC = strings.TrimSpace(v), true
		case "applied system routing mode":
			m.Applied, haveA = strings.TrimSpace(v), true
		}
	}
	if !haveC || !haveA {
		return m, errors.New("`show system routing mode` answered without its Configured and Applied System Routing Mode lines")
	}
	return m, nil
}

// disruptive are configuration lines whose commit restarts the
// forwarding engine.
var disruptive = []struct{ nos, line, msg string }{
	// Juniper, "overlay-ecmp": committing it restarts the PFE on QFX5110,
	// QFX5120 and EX4650.
	// https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/overlay-ecmp-edit-forwarding-options-vxlan-routing.html
	{render.Junos, "set forwarding-options vxlan-routing overlay-ecmp", "the deploy adds `forwarding-options vxlan-routing overlay-ecmp`: committing it restarts the forwarding engine, traffic through the switch stops until it is back"},
	// Juniper, "vxlan-gbp-profile": committing it restarts the PFE.
	// https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/vxlan-gbp-profile.html
	{render.Junos, "set chassis forwarding-options vxlan-gbp-profile", "the deploy adds `chassis forwarding-options vxlan-gbp-profile`: committing it restarts the forwarding engine, traffic through the switch stops until it is back"},
}

// breakoutLine tells, per NOS, the rendered lines that split ports
// (internal/fabric/render/breakout.go writes them).
var breakoutLine = map[string]func(string) bool{
	render.NXOS: func(l string) bool { return strings.HasPrefix(l, "interface breakout module ") },
	render.Junos: func(l string) bool {
		return strings.Contains(l, " number-of-sub-ports ") || strings.Contains(l, " channel-speed ")
	},
	render.EOS:   func(l string) bool { return strings.HasPrefix(l, "speed ") },
	render.SONiC: func(l string) bool { return strings.Contains(l, "\"brkout_mode\"") },
}

// Disruptions are the conditions of lines d adds (against d.Previous)
// that disrupt forwarding while they are applied.
func Disruptions(d Device) []domain.SwitchCondition {
	var out []domain.SwitchCondition
	for _, x := range disruptive {
		if d.NOS == x.nos && hasLine(d.Files, x.line) && !hasLine(d.Previous, x.line) {
			out = append(out, domain.SwitchCondition{Type: domain.SwitchForwardingRestart, OK: false, Reason: "Disruptive", Message: x.msg})
		}
	}
	if is := breakoutLine[d.NOS]; is != nil {
		old := map[string]bool{}
		for _, l := range matching(d.Previous, is) {
			old[l] = true
		}
		var added []string
		for _, l := range matching(d.Files, is) {
			if !old[l] {
				added = append(added, l)
			}
		}
		if len(added) > 0 {
			shown := added[:min(len(added), 3)]
			msg := fmt.Sprintf("the deploy adds or changes %d port breakout line(s) (%s): the switch re-lays those ports and traffic on them stops while it does", len(added), strings.Join(shown, "; "))
			out = append(out, domain.SwitchCondition{Type: domain.SwitchPortBreakout, OK: false, Reason: "Disruptive", Message: msg})
		}
	}
	return out
}

// matching are the trimmed lines of files that is accepts.
func matching(files []render.File, is func(string) bool) []string {
	var out []string
	for _, f := range files {
		for l := range strings.SplitSeq(f.Content, "\n") {
			if l = strings.TrimSpace(l); is(l) {
				out = append(out, l)
			}
		}
	}
	return out
}

func hasLine(files []render.File, want string) bool {
	for _, f := range files {
		for l := range strings.SplitSeq(f.Content, "\n") {
			if strings.TrimSpace(l) == want {
				return true
			}
		}
	}
	return false
}
