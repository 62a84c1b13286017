// Package bgprom is a prometheus.Collector of a bloomguard Client:
//
//	prometheus.MustRegister(bgprom.NewCollector(client))
//
// Each scrape reads the numbers the C library keeps (nothing runs per query) for the client's open
// filters, named as the OpenTelemetry export (package bgotel) with dots made underscores and
// Prometheus's unit and _total suffixes: db_client_operation_duration_seconds (histogram; labels
// db_system_name, db_operation_name, error_type), db_client_connection_count,
// bloomguard_answers_total (bloomguard_answer_source), bloomguard_rotations_total and
// bloomguard_rotation_duration_seconds (bloomguard_rotation_strategy, bloomguard_rotation_outcome,
// error_type), bloomguard_breaker_state, bloomguard_cluster_redirects_total
// (bloomguard_redirect_type), bloomguard_tracking_invalidations_total; the filter as
// bloomguard_filter_name (WithFilterNames(false) sums every filter into one series). A label that
// does not apply is empty (Prometheus reads it as absent). Counters belong to open filter handles:
// a handle closed takes its counts with it (a reset to Prometheus).
package bgprom

import (
	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	"github.com/bloomguard/bloomguard/bindings/go/otel/internal/snap"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector collects a client's metrics at each scrape.
type Collector struct {
	c           *bloomguard.Client
	filterNames bool
}

// Option configures NewCollector.
type Option func(*Collector)

// WithFilterNames(false) leaves bloomguard_filter_name out. Default true.
func WithFilterNames(on bool) Option { return func(c *Collector) { c.filterNames = on } }

// NewCollector returns the collector of c.
func NewCollector(c *bloomguard.Client, opts ...Option) *Collector {
	col := &Collector{c: c, filterNames: true}
	for _, o := range opts {
		o(col)
	}
	return col
}

var (
	opLabels  = []string{"db_system_name", "bloomguard_filter_name", "db_operation_name", "error_type"}
	rotLabels = []string{"db_system_name", "bloomguard_filter_name", "bloomguard_rotation_strategy",
		"bloomguard_rotation_outcome", "error_type"}
	durationDesc = prometheus.NewDesc("db_client_operation_duration_seconds",
		"Duration of bloomguard's operations on Redis.", opLabels, nil)
	rotationDurDesc = prometheus.NewDesc("bloomguard_rotation_duration_seconds",
		"Duration of rotations, begin to commit or abort.", rotLabels, nil)
	rotationsDesc = prometheus.NewDesc("bloomguard_rotations_total", "Rotations by strategy and outcome.", rotLabels, nil)
	connsDesc     = prometheus.NewDesc("db_client_connection_count", "Connections to Redis open now.",
		[]string{"db_system_name"}, nil)
	answersDesc = prometheus.NewDesc("bloomguard_answers_total", "Query answers by where they came from.",
		[]string{"db_system_name", "bloomguard_filter_name", "bloomguard_answer_source"}, nil)
	breakerDesc = prometheus.NewDesc("bloomguard_breaker_state", "Circuit breaker: 0 closed, 1 open, 2 half-open.",
		[]string{"db_system_name", "bloomguard_filter_name"}, nil)
	redirectsDesc = prometheus.NewDesc("bloomguard_cluster_redirects_total", "Redis Cluster redirects followed.",
		[]string{"db_system_name", "bloomguard_redirect_type"}, nil)
	invalidationsDesc = prometheus.NewDesc("bloomguard_tracking_invalidations_total",
		"Invalidations pushed by the server.", []string{"db_system_name"}, nil)
)

// Describe sends the descriptions of every metric.
func (col *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{durationDesc, rotationDurDesc, rotationsDesc, connsDesc, answersDesc,
		breakerDesc, redirectsDesc, invalidationsDesc} {
		ch <- d
	}
}

func buckets(h *snap.Hist) map[float64]uint64 {
	out := make(map[float64]uint64, len(bloomguard.HistogramBounds))
	var running uint64
	for i, b := range bloomguard.HistogramBounds {
		running += h.Counts[i]
		out[b] = running
	}
	return out
}

// Collect reads the client and sends every metric.
func (col *Collector) Collect(ch chan<- prometheus.Metric) {
	s := snap.Read(col.c, col.filterNames)
	for k, h := range s.Durations {
		ch <- prometheus.MustNewConstHistogram(durationDesc, h.Count, h.Sum, buckets(h), "redis", k.Filter,
			k.Op.String(), snap.ErrorType(k.Outcome))
	}
	for k, h := range s.Rotations {
		outcome, errType := snap.RotationOutcome(k.Outcome)
		labels := []string{"redis", k.Filter, k.Op.RotationStrategy().String(), outcome, errType}
		ch <- prometheus.MustNewConstHistogram(rotationDurDesc, h.Count, h.Sum, buckets(h), labels...)
		ch <- prometheus.MustNewConstMetric(rotationsDesc, prometheus.CounterValue, float64(h.Count), labels...)
	}
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(s.Connections), "redis")
	for k, n := range s.Answers {
		ch <- prometheus.MustNewConstMetric(answersDesc, prometheus.CounterValue, float64(n), "redis", k.Filter,
			snap.SourceName(k.Source))
	}
	for name, st := range s.Breaker {
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(st), "redis", name)
	}
	ch <- prometheus.MustNewConstMetric(redirectsDesc, prometheus.CounterValue, float64(s.Moved), "redis", "moved")
	ch <- prometheus.MustNewConstMetric(redirectsDesc, prometheus.CounterValue, float64(s.Ask), "redis", "ask")
	ch <- prometheus.MustNewConstMetric(invalidationsDesc, prometheus.CounterValue, float64(s.Invalidations), "redis")
}
