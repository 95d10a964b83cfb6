package fabric

import "strconv"

// VRFName is the name Compile gives a tenant's VRF on every device: the
// tenant's name, or "T<VRF id>" when the name is longer than a NOS accepts
// or reserved by one. The host binder uses it to name the job's VRF.
func VRFName(tenant string, vrfID uint16) string {
	if len(tenant) > maxVRFName || reservedVRFName(tenant) {
		return "T" + strconv.Itoa(int(vrfID))
	}
	return tenant
}
