package sched

import (
	"fmt"
	"strconv"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// Capacity is counted in units of 1/7000 GPU (domain.UnitsPerGPU): a whole
// GPU, a MIG slice (compute slices / 7) and a time-sliced share are all
// whole numbers, and quota arithmetic stays exact.
const unit = domain.UnitsPerGPU

// Demand is what a job asks for, in units. MIG profiles differ by model
// in memory, not in compute slices, so any model's catalog gives the size.
func Demand(j *domain.JobSpec) (int, error) {
	switch {
	case j.Share > 0:
		return domain.ShareUnits(j.Share), nil
	case j.MIGProfile != "":
		if u, ok := mig.Units(j.GPUModel, j.MIGProfile); ok {
			return j.MIGCount * u, nil
		}
		p, err := migProfile(j.GPUModel, j.MIGProfile)
		if err != nil {
			return 0, err
		}
		return j.MIGCount * p.GPUUnits(), nil
	}
	return j.GPUs * unit, nil
}

// migProfile finds the profile in the job's model, or in any MIG-capable
// model when the job names none.
func migProfile(model, name string) (mig.Profile, error) {
	if model != "" {
		return mig.Lookup(model, name)
	}
	var first error
	for _, m := range mig.Models() {
		p, err := mig.Lookup(m, name)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return mig.Profile{}, domain.Invalid("migProfile", "MIG profile %q exists on no GPU model (%v)", name, first)
}

// held is what a placed job holds, in units.
func held(j *domain.Job) int { return Held(j.Placement) }

// Held is the capacity placements hold, in units: whole GPUs, MIG slices by
// their compute slices, shares by their fraction. Usage accounting records
// it per run, so a GPU-equivalent-hour is what the scheduler counts.
func Held(pls []domain.Placement) int {
	n := 0
	for _, p := range pls {
		n += placementUnits(p)
	}
	return n
}

// eachGPUTaken calls take with each GPU of p and the thousandths of it p
// takes: a share its fraction, a whole GPU or a GPU with MIG slices on it
// 1000 (a sliced GPU is no longer whole for anyone).
func eachGPUTaken(p domain.Placement, take func(gpu, milli int)) {
	for _, g := range p.GPUs {
		if p.Share > 0 && len(p.MIG) == 0 {
			take(g, domain.ShareUnits(p.Share)/Milli)
		} else {
			take(g, 1000)
		}
	}
	for _, m := range p.MIG {
		take(m.GPU, 1000)
	}
}

// demand is Demand for jobs the state machine accepted (always valid).
func demand(j *domain.Job) int {
	n, err := Demand(&j.JobSpec)
	if err != nil {
		return j.GPUs * unit
	}
	return n
}

// gpus renders units as GPUs for messages: "8", "0.43".
func gpus(units int) string {
	if units%unit == 0 {
		return strconv.Itoa(units / unit)
	}
	return fmt.Sprintf("%.2f", float64(units)/unit)
}
