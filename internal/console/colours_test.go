package console

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestColoursStableAndDistinct: a tenant has the same colour alone as
// among others, and up to the palette's size no two share one.
func TestColoursStableAndDistinct(t *testing.T) {
	var all []domain.Tenant
	for i := range palette {
		all = append(all, domain.Tenant{Name: fmt.Sprintf("tenant-%d", i)})
	}
	m := colours(all)
	seen := map[string]string{}
	for n, c := range m {
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share %s", n, other, c)
		}
		seen[c] = n
	}
	demo := colours([]domain.Tenant{{Name: "acme"}, {Name: "globex"}})
	for _, n := range []string{"acme", "globex"} {
		if alone := colours([]domain.Tenant{{Name: n}}); alone[n] != demo[n] {
			t.Errorf("%s is %s alone, %s with the other", n, alone[n], demo[n])
		}
	}
	if demo["acme"] == demo["globex"] {
		t.Errorf("acme and globex share %s", demo["acme"])
	}
	t.Logf("demo colours: %v", demo)
}
