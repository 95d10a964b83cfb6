package state

import (
	"fmt"
	"testing"
)

// TestFingerprintDeployedInLockstep: two devices whose deployed revision
// moves on together change the fingerprint (with FNV alone, about half of
// the pairs did not, and a held job's compile never came).
func TestFingerprintDeployedInLockstep(t *testing.T) {
	same := 0
	for a := range 16 {
		for b := a + 1; b < 16; b++ {
			for rev := 1; rev < 20; rev++ {
				at := func(r int) uint64 {
					return fingerprintItem("d|%s|%d", fmt.Sprintf("s1-leaf%d", a), r) + fingerprintItem("d|%s|%d", fmt.Sprintf("s1-leaf%d", b), r)
				}
				if at(rev) == at(rev+1) {
					same++
				}
			}
		}
	}
	if same > 0 {
		t.Fatalf("%d pairs of devices deploying the next revision together leave the fingerprint unchanged", same)
	}
}
