package kube

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// request is what one pod asks of jobfabric: whole GPUs, MIG slices or a
// share of one GPU.
type request struct {
	gpus       int
	migProfile string
	migCount   int
	share      float64
	// claims: some GPUs come from DRA ResourceClaims, which a scheduler
	// allocates, so the bridge lets one bind the pod (its affinity names
	// the server) instead of binding it itself.
	claims bool
}

func (r request) String() string {
	switch {
	case r.migProfile != "":
		return fmt.Sprintf("%d MIG %s", r.migCount, r.migProfile)
	case r.share > 0:
		return fmt.Sprintf("a %g share of a GPU", r.share)
	}
	return fmt.Sprintf("%d GPUs", r.gpus)
}

// podRequest reads what p asks for: nvidia.com/gpu (the effective
// request: the containers' sum, or the largest init container's), the GPU
// devices of its DRA claims, or the MIG and share annotations. why says
// what is wrong with the pod; err is a failure to read a claim.
func (b *Bridge) podRequest(ctx context.Context, p *corev1.Pod) (r request, why string, err error) {
	sum, initMax := 0, 0
	for _, c := range p.Spec.Containers {
		sum += gpuQuantity(c)
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, gpuQuantity(c))
	}
	r.gpus = max(sum, initMax)
	for _, pc := range p.Spec.ResourceClaims {
		n, why, err := b.claimGPUs(ctx, p.Namespace, pc)
		if err != nil || why != "" {
			return r, why, err
		}
		if n > 0 {
			r.gpus += n
			r.claims = true
		}
	}
	if prof := p.Annotations[AnnotationMIGProfile]; prof != "" {
		r.migProfile, r.migCount = prof, 1
		if raw := p.Annotations[AnnotationMIGCount]; raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 || n > 56 {
				return r, fmt.Sprintf("pod %s: %s %q must be a whole number of MIG slices (1 to 56)", p.Name, AnnotationMIGCount, raw), nil
			}
			r.migCount = n
		}
	} else if p.Annotations[AnnotationMIGCount] != "" {
		return r, fmt.Sprintf("pod %s: %s needs %s (such as 3g.40gb)", p.Name, AnnotationMIGCount, AnnotationMIGProfile), nil
	}
	if raw := p.Annotations[AnnotationShare]; raw != "" {
		s, err := strconv.ParseFloat(raw, 64)
		if err != nil || s <= 0 || s >= 1 {
			return r, fmt.Sprintf("pod %s: %s %q must be a fraction of one GPU, above 0 and below 1", p.Name, AnnotationShare, raw), nil
		}
		r.share = s
	}
	kinds := 0
	for _, set := range []bool{r.gpus > 0, r.migProfile != "", r.share > 0} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return r, fmt.Sprintf("pod %s must request %s (at least 1), GPUs through a ResourceClaim of device class %s, or MIG slices or a share (%s, %s)",
			p.Name, ResourceGPU, b.cfg.GPUDeviceClass, AnnotationMIGProfile, AnnotationShare), nil
	case kinds > 1:
		return r, fmt.Sprintf("pod %s asks for %s, MIG slices and a share at once: exactly one of them", p.Name, ResourceGPU), nil
	}
	return r, "", nil
}

// gpuQuantity is a container's nvidia.com/gpu (extended resources are
// requested as limits; a request, when given, equals the limit).
func gpuQuantity(c corev1.Container) int {
	q, ok := c.Resources.Limits[ResourceGPU]
	if !ok {
		q = c.Resources.Requests[ResourceGPU]
	}
	return int(q.Value())
}

// claimGPUs counts the devices of GPUDeviceClass a pod's claim asks for
// (resource.k8s.io/v1), from the claim or the template it is made from.
func (b *Bridge) claimGPUs(ctx context.Context, ns string, pc corev1.PodResourceClaim) (int, string, error) {
	var spec resourcev1.DeviceClaim
	res := b.cfg.Kube.ResourceV1()
	switch {
	case pc.ResourceClaimName != nil:
		c, err := res.ResourceClaims(ns).Get(ctx, *pc.ResourceClaimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 0, fmt.Sprintf("ResourceClaim %s/%s (claim %s of the pod) does not exist", ns, *pc.ResourceClaimName, pc.Name), nil
		}
		if err != nil {
			return 0, "", fmt.Errorf("ResourceClaim %s/%s: %w", ns, *pc.ResourceClaimName, err)
		}
		spec = c.Spec.Devices
	case pc.ResourceClaimTemplateName != nil:
		c, err := res.ResourceClaimTemplates(ns).Get(ctx, *pc.ResourceClaimTemplateName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 0, fmt.Sprintf("ResourceClaimTemplate %s/%s (claim %s of the pod) does not exist", ns, *pc.ResourceClaimTemplateName, pc.Name), nil
		}
		if err != nil {
			return 0, "", fmt.Errorf("ResourceClaimTemplate %s/%s: %w", ns, *pc.ResourceClaimTemplateName, err)
		}
		spec = c.Spec.Spec.Devices
	default:
		return 0, "", nil
	}
	n := 0
	for _, r := range spec.Requests {
		if r.Exactly == nil {
			if len(r.FirstAvailable) > 0 && r.FirstAvailable[0].DeviceClassName == b.cfg.GPUDeviceClass {
				return 0, fmt.Sprintf("claim %s, request %s: firstAvailable alternatives are not a GPU count jobfabric can place; use exactly", pc.Name, r.Name), nil
			}
			continue
		}
		if r.Exactly.DeviceClassName != b.cfg.GPUDeviceClass {
			continue
		}
		switch r.Exactly.AllocationMode {
		case resourcev1.DeviceAllocationModeAll:
			return 0, fmt.Sprintf("claim %s, request %s: allocationMode All is not a GPU count jobfabric can place; use ExactCount", pc.Name, r.Name), nil
		default:
			c := r.Exactly.Count
			if c == 0 {
				c = 1
			}
			n += int(c)
		}
	}
	return n, "", nil
}

// jobRequest is the job spec's share of a gang of n alike pods.
func jobRequest(s *domain.JobSpec, r request, n int) {
	switch {
	case r.migProfile != "":
		s.MIGProfile, s.MIGCount = r.migProfile, r.migCount
	case r.share > 0:
		s.Share = r.share
	default:
		// One server per pod: the pods map onto the job's placements.
		s.GPUs, s.GPUsPerNode = r.gpus*n, r.gpus
	}
}
