package fabric_test

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

func TestVRFName(t *testing.T) {
	tests := map[string]struct {
		tenant string
		id     uint16
		want   string
	}{
		"a short name is the VRF name": {tenant: "acme", id: 7, want: "acme"},
		"15 characters still fit":      {tenant: "abcdefghijklmno", id: 7, want: "abcdefghijklmno"},
		"16 characters do not":         {tenant: "abcdefghijklmnop", id: 7, want: "T7"},
		"a reserved name":              {tenant: "mgmt", id: 12, want: "T12"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := fabric.VRFName(tc.tenant, tc.id); got != tc.want {
				t.Fatalf("VRFName(%q, %d) = %q, want %q", tc.tenant, tc.id, got, tc.want)
			}
		})
	}
}
