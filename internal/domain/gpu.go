package domain

import "sort"

// GPUModel describes a GPU model the scheduler knows. Unknown models are
// rejected so that quota and placement never count a GPU they cannot reason about.
type GPUModel struct {
	Name      string `json:"name"`
	MemoryGiB int    `json:"memoryGiB"`
	// MIGSlices is the number of compute slices with MIG (7 on A100/H100/H200/B200),
	// 0 when the model has no MIG.
	MIGSlices int `json:"migSlices"`
}

var gpuModels = map[string]GPUModel{
	"A100-40GB":  {Name: "A100-40GB", MemoryGiB: 40, MIGSlices: 7},
	"A100-80GB":  {Name: "A100-80GB", MemoryGiB: 80, MIGSlices: 7},
	"H100-80GB":  {Name: "H100-80GB", MemoryGiB: 80, MIGSlices: 7},
	"H100-94GB":  {Name: "H100-94GB", MemoryGiB: 94, MIGSlices: 7},
	"H200-141GB": {Name: "H200-141GB", MemoryGiB: 141, MIGSlices: 7},
	"B200-180GB": {Name: "B200-180GB", MemoryGiB: 180, MIGSlices: 7},
	"GB200":      {Name: "GB200", MemoryGiB: 186, MIGSlices: 7},
	"L40S-48GB":  {Name: "L40S-48GB", MemoryGiB: 48},
	"V100-32GB":  {Name: "V100-32GB", MemoryGiB: 32},
}

// LookupGPUModel returns the model with that name.
func LookupGPUModel(name string) (GPUModel, bool) {
	m, ok := gpuModels[name]
	return m, ok
}

// GPUModelNames lists the known model names, sorted, for error messages and help.
func GPUModelNames() []string {
	out := make([]string, 0, len(gpuModels))
	for n := range gpuModels {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
