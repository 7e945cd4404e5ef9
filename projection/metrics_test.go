package projection

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAProjectorThatOpensCaughtUpSaysItsGeneration reopens a projection
// that holds the whole stream: it applies nothing, and its generation gauge
// still says where it is (it read 0 until a next commit, so a killed
// projector restarted caught up looked as if it had applied nothing).
func TestAProjectorThatOpensCaughtUpSaysItsGeneration(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.start(dir)
	e.publish("s-gauge", line(goodHeader, "s-gauge"))
	last := e.publish("s-gauge", line(turnStart, 0))
	waitGen(t, r.p, last)
	r.stop()

	reg := prometheus.NewRegistry()
	again := e.open(dir, WithRegisterer(reg))
	defer again.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "dshq_projector_generation" {
			got = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if got != float64(last) {
		t.Errorf("dshq_projector_generation %v on opening a store at generation %d", got, last)
	}
}
