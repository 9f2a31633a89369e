package load

import "testing"

func TestSummarise(t *testing.T) {
	var us []float64
	for i := 1; i <= 100; i++ {
		us = append(us, float64(101-i))
	}
	l := summarise(us)
	if l.Samples != 100 || l.MeanUS != 50.5 || l.P50US != 50 || l.P99US != 99 || l.MaxUS != 100 {
		t.Fatalf("%+v", l)
	}
	if l := summarise(nil); l.Samples != 0 {
		t.Fatalf("%+v", l)
	}
}
