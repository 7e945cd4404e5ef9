package projection

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq/index"
)

// metrics are the projector's Prometheus metrics.
type metrics struct {
	reg          prometheus.Registerer
	collectors   []prometheus.Collector
	applied      *prometheus.CounterVec // records applied, by kind
	quarantined  prometheus.Counter
	batchSeconds prometheus.Histogram
	lag          prometheus.Gauge
	generation   prometheus.Gauge
	indexDocs    prometheus.GaugeFunc
	indexBytes   prometheus.GaugeFunc
	cacheBytes   prometheus.Gauge
	rebuilds     prometheus.Counter
}

// newMetrics creates the metrics and registers them on reg (when not nil);
// stats reads the serving index's size at scrape time.
func newMetrics(reg prometheus.Registerer, stats func() (index.Stats, error)) (*metrics, error) {
	m := &metrics{
		reg: reg,
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dshq_projector_records_applied_total",
			Help: "Stream records applied, by kind (header, event, invalid, quarantined).",
		}, []string{"kind"}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dshq_projector_quarantined_records_total",
			Help: "Records refused and quarantined.",
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dshq_projector_batch_seconds",
			Help:    "Time to apply one batch to the store and the index.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dshq_projector_lag_records",
			Help: "Records in the stream not yet applied (as of the last batch).",
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dshq_projector_generation",
			Help: "Stream sequence through which the projection is applied.",
		}),
		indexDocs: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dshq_projector_index_docs",
			Help: "Documents in the full-text index.",
		}, func() float64 { s, _ := stats(); return float64(s.Docs) }),
		indexBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dshq_projector_index_bytes",
			Help: "Size of the full-text index on disk.",
		}, func() float64 { s, _ := stats(); return float64(s.DiskBytes) }),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dshq_projector_fold_cache_bytes",
			Help: "Bytes of fold states, with their sessions' stored values, held in the in-memory cache.",
		}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dshq_projector_rebuilds_total",
			Help: "Rebuilt projections swapped in.",
		}),
	}
	// Every kind's series exists from the start, at 0: a scrape before the
	// first record (and rate() over it) sees the counter.
	for _, kind := range []string{"header", "event", "invalid", "quarantined"} {
		m.applied.WithLabelValues(kind)
	}
	m.collectors = []prometheus.Collector{m.applied, m.quarantined, m.batchSeconds, m.lag, m.generation, m.indexDocs, m.indexBytes, m.cacheBytes, m.rebuilds}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("register projector metrics: already registered on this registry")
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
