package fabric_test

import (
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

func TestComparePorts(t *testing.T) {
	for _, want := range [][]string{
		{"swp1", "swp2", "swp10"},
		{"Ethernet1/1", "Ethernet2/1", "Ethernet10/1", "Ethernet65"},
		{"Ethernet1/1", "Ethernet1/1/1", "Ethernet1/1/4", "Ethernet1/2", "Ethernet1/10"},
		{"et-0/0/0", "et-0/0/1:0", "et-0/0/1:3", "et-0/0/9", "et-0/0/10", "xe-0/0/64"},
		{"Ethernet0", "Ethernet8", "Ethernet512"},
		{"swp01", "swp1"},
	} {
		got := slices.Clone(want)
		slices.Reverse(got)
		slices.SortFunc(got, fabric.ComparePorts)
		if !slices.Equal(got, want) {
			t.Errorf("sorted %v, want %v", got, want)
		}
	}
}
