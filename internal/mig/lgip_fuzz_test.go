package mig_test

import (
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// FuzzParseLGIP feeds `nvidia-smi mig -lgip` parsing arbitrary text: a
// refusal is an invalid_argument *domain.Error naming the line and no rows;
// an accepted row has a name, non-negative counts, free <= total, a finite
// memory size, and CE/JPEG/OFA either counted or -1 (absent); parsing is
// deterministic and yields at most one row per line.
func FuzzParseLGIP(f *testing.F) {
	b, err := os.ReadFile("testdata/nvidia-smi-mig-lgip_h100-sxm5-80gb_4gpu_stackhpc.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := mig.ParseLGIP(in)
		again, err2 := mig.ParseLGIP(in)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(rows, again) {
			t.Fatalf("not deterministic: %v (%v) then %v (%v)", rows, err, again, err2)
		}
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field == "" || !strings.Contains(de.Message, "line ") {
				t.Fatalf("refusal %T %v: want an invalid_argument *domain.Error naming the line", err, err)
			}
			if rows != nil {
				t.Fatalf("refused input returned rows too: %v", rows)
			}
			return
		}
		if len(rows) > strings.Count(in, "\n")+1 {
			t.Fatalf("%d rows from %d lines", len(rows), strings.Count(in, "\n")+1)
		}
		for _, r := range rows {
			if r.Name == "" || r.GPU < 0 || r.ID < 0 || r.Free < 0 || r.Free > r.Total || r.SMs < 0 || r.DEC < 0 || r.ENC < 0 ||
				math.IsNaN(r.MemoryGiB) || math.IsInf(r.MemoryGiB, 0) || r.MemoryGiB < 0 || r.CE < -1 || r.JPEG < -1 || r.OFA < -1 {
				t.Fatalf("accepted row %+v", r)
			}
		}
	})
}
