// Package bgotel exports a bloomguard Client's metrics to OpenTelemetry, with the names of its
// database-client semantic conventions and bloomguard's own:
//
//	reg, err := bgotel.Instrument(client, bgotel.WithMeterProvider(provider))   // counters, gauges
//	reader := sdkmetric.NewPeriodicReader(exporter,
//		sdkmetric.WithProducer(bgotel.NewProducer(client)))                     // the two histograms
//
// The numbers are those the C library keeps (bloomguard/observe.h): nothing runs in Go per
// query; they are read when a reader collects. Every point has db.system.name = "redis", and per
// filter bloomguard.filter.name unless WithFilterNames(false), which sums every filter into one
// series:
//
//   - db.client.operation.duration: histogram, s (db.operation.name: contains, add, init, count,
//     info, delete, expire, persist; error.type for a failure: timeout, connection, ...)
//   - db.client.connection.count: up-down counter (pooled, multiplexed and queue connections)
//   - bloomguard.answers: counter (bloomguard.answer.source: redis, snapshot, callback,
//     assumed_present, assumed_absent)
//   - bloomguard.rotations: counter, and bloomguard.rotation.duration: histogram, s
//     (bloomguard.rotation.strategy: swap, naive, locked; bloomguard.rotation.outcome: committed,
//     aborted, failed, with error.type)
//   - bloomguard.breaker.state: gauge (0 closed, 1 open, 2 half-open)
//   - bloomguard.cluster.redirects: counter (bloomguard.redirect.type: moved, ask)
//   - bloomguard.tracking.invalidations: counter
//
// The histograms are aggregated in C, and the OpenTelemetry metrics API has no instrument for a
// histogram aggregated elsewhere: the SDK's Producer is how such data joins a reader, hence
// NewProducer (cumulative points; no min and max: the library keeps no exact extremes). Counts
// belong to open filter handles (Client.OpenFilters): a handle closed takes its counts with it.
package bgotel

import (
	"context"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	"github.com/bloomguard/bloomguard/bindings/go/otel/internal/snap"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"time"
)

// ScopeName is the instrumentation scope of every bloomguard metric.
const ScopeName = "github.com/bloomguard/bloomguard/bindings/go/otel"

// Option configures Instrument and NewProducer.
type Option func(*config)

type config struct {
	provider    metric.MeterProvider
	filterNames bool
}

// WithMeterProvider is the provider Instrument registers with (default: otel.GetMeterProvider()).
func WithMeterProvider(p metric.MeterProvider) Option { return func(c *config) { c.provider = p } }

// WithFilterNames(false) leaves bloomguard.filter.name out (every filter summed into one series),
// for when filters are many. Default true.
func WithFilterNames(on bool) Option { return func(c *config) { c.filterNames = on } }

func newConfig(opts []Option) config {
	c := config{filterNames: true}
	for _, o := range opts {
		o(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	return c
}

func base(filter string, kv ...attribute.KeyValue) metric.MeasurementOption {
	attrs := append([]attribute.KeyValue{attribute.String("db.system.name", "redis")}, kv...)
	if filter != "" {
		attrs = append(attrs, attribute.String("bloomguard.filter.name", filter))
	}
	return metric.WithAttributes(attrs...)
}

// Instrument registers c's counters and gauges (every metric but the two histograms: NewProducer)
// as observable instruments; one callback reads the library once per collection. Unregister the
// returned registration to stop.
func Instrument(c *bloomguard.Client, opts ...Option) (metric.Registration, error) {
	cfg := newConfig(opts)
	m := cfg.provider.Meter(ScopeName)
	conns, err := m.Int64ObservableUpDownCounter("db.client.connection.count", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections to Redis open now."))
	if err != nil {
		return nil, err
	}
	answers, err := m.Int64ObservableCounter("bloomguard.answers", metric.WithUnit("{answer}"),
		metric.WithDescription("Query answers by where they came from."))
	if err != nil {
		return nil, err
	}
	rotations, err := m.Int64ObservableCounter("bloomguard.rotations", metric.WithUnit("{rotation}"),
		metric.WithDescription("Rotations by strategy and outcome."))
	if err != nil {
		return nil, err
	}
	breaker, err := m.Int64ObservableGauge("bloomguard.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("Circuit breaker: 0 closed, 1 open, 2 half-open."))
	if err != nil {
		return nil, err
	}
	redirects, err := m.Int64ObservableCounter("bloomguard.cluster.redirects", metric.WithUnit("{redirect}"),
		metric.WithDescription("Redis Cluster redirects followed."))
	if err != nil {
		return nil, err
	}
	invalidations, err := m.Int64ObservableCounter("bloomguard.tracking.invalidations",
		metric.WithUnit("{invalidation}"), metric.WithDescription("Invalidations pushed by the server."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := snap.Read(c, cfg.filterNames)
		o.ObserveInt64(conns, s.Connections, base(""))
		for k, n := range s.Answers {
			o.ObserveInt64(answers, n, base(k.Filter, attribute.String("bloomguard.answer.source", snap.SourceName(k.Source))))
		}
		for k, h := range s.Rotations {
			o.ObserveInt64(rotations, int64(h.Count), base(k.Filter, rotationAttrs(k)...))
		}
		for name, st := range s.Breaker {
			o.ObserveInt64(breaker, int64(st), base(name))
		}
		o.ObserveInt64(redirects, s.Moved, base("", attribute.String("bloomguard.redirect.type", "moved")))
		o.ObserveInt64(redirects, s.Ask, base("", attribute.String("bloomguard.redirect.type", "ask")))
		o.ObserveInt64(invalidations, s.Invalidations, base(""))
		return nil
	}, conns, answers, rotations, breaker, redirects, invalidations)
}

func rotationAttrs(k snap.HistKey) []attribute.KeyValue {
	outcome, errType := snap.RotationOutcome(k.Outcome)
	kv := []attribute.KeyValue{attribute.String("bloomguard.rotation.strategy", k.Op.RotationStrategy().String()),
		attribute.String("bloomguard.rotation.outcome", outcome)}
	if errType != "" {
		kv = append(kv, attribute.String("error.type", errType))
	}
	return kv
}

func durationAttrs(k snap.HistKey) []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.String("db.operation.name", k.Op.String())}
	if e := snap.ErrorType(k.Outcome); e != "" {
		kv = append(kv, attribute.String("error.type", e))
	}
	return kv
}

// producer is NewProducer's.
type producer struct {
	c     *bloomguard.Client
	cfg   config
	start time.Time
}

// NewProducer returns the SDK Producer of c's two histograms, db.client.operation.duration and
// bloomguard.rotation.duration: give it to a reader (sdkmetric.WithProducer). WithMeterProvider
// does not apply.
func NewProducer(c *bloomguard.Client, opts ...Option) sdkmetric.Producer {
	return &producer{c: c, cfg: newConfig(opts), start: time.Now()}
}

func (p *producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	s := snap.Read(p.c, p.cfg.filterNames)
	now := time.Now()
	var ms []metricdata.Metrics
	for _, h := range []struct {
		name, desc string
		hists      map[snap.HistKey]*snap.Hist
		attrs      func(snap.HistKey) []attribute.KeyValue
	}{
		{"db.client.operation.duration", "Duration of bloomguard's operations on Redis.", s.Durations, durationAttrs},
		{"bloomguard.rotation.duration", "Duration of rotations, begin to commit or abort.", s.Rotations, rotationAttrs},
	} {
		if len(h.hists) == 0 {
			continue
		}
		var points []metricdata.HistogramDataPoint[float64]
		for k, v := range h.hists {
			attrs := append([]attribute.KeyValue{attribute.String("db.system.name", "redis")}, h.attrs(k)...)
			if k.Filter != "" {
				attrs = append(attrs, attribute.String("bloomguard.filter.name", k.Filter))
			}
			points = append(points, metricdata.HistogramDataPoint[float64]{
				Attributes: attribute.NewSet(attrs...), StartTime: p.start, Time: now, Count: v.Count,
				Bounds: bloomguard.HistogramBounds, BucketCounts: v.Counts, Sum: v.Sum,
			})
		}
		ms = append(ms, metricdata.Metrics{Name: h.name, Description: h.desc, Unit: "s",
			Data: metricdata.Histogram[float64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality}})
	}
	if len(ms) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: ms}}, nil
}
