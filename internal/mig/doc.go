// Package mig owns the MIG (Multi-Instance GPU) geometry the scheduler must
// respect: which GPU instance profiles each GPU model offers, where on the GPU
// each profile may be placed, and whether a set of instances can coexist on one
// GPU. A scheduler that only counts slices promises layouts the GPU cannot
// create (3g+3g+1g is 7 slices and does not fit); this package answers from the
// placement table instead.
//
// Geometry. A MIG-capable GPU has 7 compute slices and 8 memory slots. A
// profile occupies a contiguous run of memory slots [start, start+size) and may
// only start at fixed slots (nvidia-smi mig -lgipp). Two instances fit together
// when their memory slots do not overlap, no profile exceeds its instance
// limit, and the compute slices add up to at most 7.
//
// Units. Capacity is counted in units of 1/7000 of a GPU (UnitsPerGPU): a whole
// GPU is 7000 units, one MIG compute slice 1000, and a quarter time-share 1750,
// so MIG slices and fractional shares add up exactly in one quota.
//
// Sources, per model:
//   - H100-80GB: the fixture mig-placements_h100-80gb.csv (IDs, instances,
//     memory and SMs from a real nvidia-smi mig -lgip on H100 SXM5 80GB; starts
//     and sizes from a real nvidia-smi mig -lgipp); tests compare it exactly.
//   - A100-40GB: the -lgipp example of NVIDIA's MIG user guide (Getting Started,
//     profile IDs 19/20/15/14/9/5/0 on A100-SXM4-40GB); memory and SMs from
//     public -lgip transcripts.
//   - A100-80GB: the same placements (the guide says A100-80GB has the 40GB
//     profiles renamed by memory, and its -lgipp equals the H100 one); memory
//     and SMs from a public -lgip transcript (A100 80GB PCIe, driver 515.86.01).
//   - H200-141GB: NVIDIA's H200 profile table gives the same memory fractions
//     and instance counts as H100 on the same GH100 die; starts are inferred
//     from H100 and no -lgip transcript was found, so memory is the nominal
//     size in the name and SMs are unknown (0).
//   - B200-180GB, GB200, H100-94GB: no catalog. NVIDIA publishes B200 memory
//     fractions and counts but no placement starts, and the placements in
//     NVIDIA's go-nvml H200/B200 mocks are simplified (a 3g instance there spans
//     3 slots, not the 4 a real -lgipp reports), so MIG is not offered on them until a
//     real -lgipp is recorded.
//
// The package is pure: no I/O outside tests, standard library and
// internal/domain only.
package mig
