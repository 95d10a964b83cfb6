package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
)

// EVPNDrifts checks every leaf's type-5 state: each selected route of a
// tenant VRF through the L3VNI must be referenced by zebra's next hop and
// router MAC of its VTEP, and both must be in the kernel of the VRF's
// namespace (labdeploy.EVPNDrifts says why they drift with FRR 8.4). It
// returns the drifts by leaf; none is the healthy answer.
func (l *Lab) EVPNDrifts(ctx context.Context) (map[string][]labdeploy.EVPNDrift, error) {
	out := map[string][]labdeploy.EVPNDrift{}
	for i := range l.Devices {
		d := &l.Devices[i]
		if d.Role != "leaf" {
			continue
		}
		vrfs, err := l.evpnVRFs(ctx, d)
		if err != nil {
			return nil, err
		}
		ds, err := labdeploy.EVPNDrifts(ctx, deploy.ExecRunner, d.Dir, vrfs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		if len(ds) > 0 {
			out[d.Name] = ds
		}
	}
	return out, nil
}

// evpnVRFs lists a leaf's L3VNIs whose VRF namespace exists.
func (l *Lab) evpnVRFs(ctx context.Context, d *Device) ([]labdeploy.EVPNVRF, error) {
	b, err := l.vtysh(ctx, d, "show evpn vni json")
	if err != nil {
		return nil, err
	}
	var vnis map[string]struct {
		VNI  uint32 `json:"vni"`
		Type string `json:"type"`
		VRF  string `json:"tenantVrf"`
	}
	if err := json.Unmarshal(b, &vnis); err != nil {
		return nil, fmt.Errorf("%s: show evpn vni json: %w", d.Name, err)
	}
	var vrfs []labdeploy.EVPNVRF
	for _, v := range vnis {
		ns := d.VRFNetnsPrefix() + v.VRF
		if v.Type != "L3" || v.VRF == "" {
			continue
		}
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		vrfs = append(vrfs, labdeploy.EVPNVRF{Name: v.VRF, VNI: v.VNI, Netns: ns})
	}
	slices.SortFunc(vrfs, func(a, b labdeploy.EVPNVRF) int { return strings.Compare(a.Name, b.Name) })
	return vrfs, nil
}
