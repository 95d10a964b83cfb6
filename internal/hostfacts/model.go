package hostfacts

import (
	"math"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// families are the product-name markers of the inventory's GPU models,
// longest first where one contains another (GB200 contains B200).
var families = []string{"GB200", "B200", "H200", "H100", "A100", "L40S", "V100"}

// ModelOf maps nvidia-smi's product name and memory to the inventory's
// model name ("NVIDIA H100 80GB HBM3", 81559 MiB -> "H100-80GB"): the
// model of the product's family whose memory is nearest, within 15%.
// It returns "" for a product the inventory has no model for.
func ModelOf(product string, memoryMiB int) string {
	p := strings.ToUpper(product)
	fam := ""
	for _, f := range families {
		if strings.Contains(p, f) {
			fam = f
			break
		}
	}
	if fam == "" || memoryMiB <= 0 {
		return ""
	}
	gib := float64(memoryMiB) / 1024
	best, bestDiff := "", math.Inf(1)
	for _, name := range domain.GPUModelNames() {
		if name != fam && !strings.HasPrefix(name, fam+"-") {
			continue
		}
		m, _ := domain.LookupGPUModel(name)
		if d := math.Abs(gib - float64(m.MemoryGiB)); d < bestDiff {
			best, bestDiff = name, d
		}
	}
	if best == "" {
		return ""
	}
	m, _ := domain.LookupGPUModel(best)
	if bestDiff > 0.15*float64(m.MemoryGiB) {
		return ""
	}
	return best
}
