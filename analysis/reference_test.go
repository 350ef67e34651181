package analysis

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// reference holds values computed by SciPy/statsmodels
// (testdata/make_reference.py), not by this package.
type reference struct {
	Binomial []struct {
		K, N   int
		P      float64
		Pvalue float64
	}
	McNemar []struct {
		B, C      int
		Pvalue    float64
		Binomtest float64
		MidP      float64 `json:"midp"`
	} `json:"mcnemar"`
	Holm []struct {
		P        []float64
		Adjusted []float64
	}
	SignFlip []struct {
		D      []float64
		Pvalue float64
	} `json:"signflip"`
	Power []struct {
		N                 int
		Psi, Delta, Alpha float64
		Power             float64
	}
}

func loadReference(t *testing.T) reference {
	t.Helper()
	b, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Binomial) == 0 || len(r.McNemar) == 0 || len(r.Holm) == 0 || len(r.SignFlip) == 0 || len(r.Power) == 0 {
		t.Fatal("reference.json is missing a section; rerun testdata/make_reference.py")
	}
	return r
}

const refTol = 1e-9

func TestReferenceBinomial(t *testing.T) {
	for _, c := range loadReference(t).Binomial {
		if got := BinomialTest(c.K, c.N, c.P); math.Abs(got-c.Pvalue) > refTol {
			t.Errorf("BinomialTest(%d, %d, %v) = %.15g, scipy %.15g", c.K, c.N, c.P, got, c.Pvalue)
		}
	}
}

func TestReferenceMcNemar(t *testing.T) {
	for _, c := range loadReference(t).McNemar {
		m := ExactMcNemar(c.B, c.C)
		if math.Abs(m.P-c.Pvalue) > refTol || math.Abs(m.P-c.Binomtest) > refTol {
			t.Errorf("ExactMcNemar(%d, %d).P = %.15g, statsmodels %.15g, scipy binomtest %.15g", c.B, c.C, m.P, c.Pvalue, c.Binomtest)
		}
		if math.Abs(m.MidP-c.MidP) > refTol {
			t.Errorf("ExactMcNemar(%d, %d).MidP = %.15g, scipy %.15g", c.B, c.C, m.MidP, c.MidP)
		}
	}
}

func TestReferenceHolm(t *testing.T) {
	for _, c := range loadReference(t).Holm {
		got := Holm(c.P)
		for i := range got {
			if math.Abs(got[i]-c.Adjusted[i]) > refTol {
				t.Errorf("Holm(%v)[%d] = %.15g, statsmodels %.15g", c.P, i, got[i], c.Adjusted[i])
			}
		}
	}
}

func TestReferenceSignFlip(t *testing.T) {
	for _, c := range loadReference(t).SignFlip {
		got, err := SignFlipTest(context.Background(), c.D, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Exact || math.Abs(got.P-c.Pvalue) > refTol {
			t.Errorf("SignFlipTest(%v) = %+v, scipy permutation_test %.15g", c.D, got, c.Pvalue)
		}
	}
}

func TestReferencePower(t *testing.T) {
	for _, c := range loadReference(t).Power {
		if got := McNemarPower(c.N, c.Psi, c.Delta, c.Alpha); math.Abs(got-c.Power) > refTol {
			t.Errorf("McNemarPower(%d, %v, %v, %v) = %.15g, brute force with scipy %.15g", c.N, c.Psi, c.Delta, c.Alpha, got, c.Power)
		}
	}
}
