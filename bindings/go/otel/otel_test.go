package bgotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	bgotel "github.com/bloomguard/bloomguard/bindings/go/otel"
	"github.com/bloomguard/bloomguard/bindings/go/otel/internal/redistest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// collect gathers the reader's metrics: name -> its data.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func has(set attribute.Set, kv map[string]string) bool {
	for k, v := range kv {
		got, ok := set.Value(attribute.Key(k))
		if v == "" {
			if ok {
				return false
			}
			continue
		}
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// histPoint is the one point of a histogram metric whose attributes are kv ("" : absent).
func histPoint(t *testing.T, data metricdata.Aggregation, kv map[string]string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("not a histogram: %T", data)
	}
	var found []metricdata.HistogramDataPoint[float64]
	for _, p := range h.DataPoints {
		if has(p.Attributes, kv) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d points with %v in %+v", len(found), kv, h.DataPoints)
	}
	return found[0]
}

func intPoint(t *testing.T, data metricdata.Aggregation, kv map[string]string) int64 {
	t.Helper()
	var points []metricdata.DataPoint[int64]
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		points = d.DataPoints
	case metricdata.Gauge[int64]:
		points = d.DataPoints
	default:
		t.Fatalf("not an int metric: %T", data)
	}
	for _, p := range points {
		if has(p.Attributes, kv) {
			return p.Value
		}
	}
	t.Fatalf("no point with %v in %+v", kv, points)
	return 0
}

// A real rotation and a real breaker trip (CLIENT PAUSE), through a ManualReader with the
// Producer and the observable instruments; the numbers against what the test did. The control:
// before any operation there is no duration point at all.
func TestInstrumentManualReader(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c, err := bloomguard.Open(srv.URL, bloomguard.WithCommandTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(bgotel.NewProducer(c)))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	if _, err := bgotel.Instrument(c, bgotel.WithMeterProvider(mp)); err != nil {
		t.Fatal(err)
	}
	f, err := c.Filter("otel-go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := collect(t, reader)["db.client.operation.duration"]; ok {
		t.Fatal("a duration point before any operation")
	}
	if _, err := f.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if _, err := f.Add(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 9; i++ {
		if ok, err := f.Contains(ctx, []byte(fmt.Sprint(i%6))); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if err := f.Rotate(ctx, 1000, 0.01, bloomguard.Swap, func(r *bloomguard.Rotation) error {
		return r.Add([]byte("0"))
	}); err != nil {
		t.Fatal(err)
	}
	m := collect(t, reader)
	name := map[string]string{"bloomguard.filter.name": "otel-go", "db.system.name": "redis"}
	with := func(kv map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range name {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	p := histPoint(t, m["db.client.operation.duration"], with(map[string]string{"db.operation.name": "contains", "error.type": ""}))
	var sum uint64
	for _, n := range p.BucketCounts {
		sum += n
	}
	if p.Count != 9 || sum != 9 || len(p.Bounds) != len(p.BucketCounts)-1 || p.Sum <= 0 {
		t.Fatalf("contains: %+v", p)
	}
	if p := histPoint(t, m["db.client.operation.duration"], with(map[string]string{"db.operation.name": "add"})); p.Count != 6 {
		t.Fatalf("add: %+v", p)
	}
	if p := histPoint(t, m["bloomguard.rotation.duration"], with(map[string]string{"bloomguard.rotation.strategy": "swap",
		"bloomguard.rotation.outcome": "committed"})); p.Count != 1 || p.Sum <= 0 {
		t.Fatalf("rotation: %+v", p)
	}
	if n := intPoint(t, m["bloomguard.rotations"], with(map[string]string{"bloomguard.rotation.outcome": "committed"})); n != 1 {
		t.Fatalf("rotations %d", n)
	}
	if n := intPoint(t, m["bloomguard.answers"], with(map[string]string{"bloomguard.answer.source": "redis"})); n != 9 {
		t.Fatalf("answers from redis %d", n)
	}
	cs, _ := c.Stats()
	if n := intPoint(t, m["db.client.connection.count"], map[string]string{"db.system.name": "redis"}); n < 1 || n != cs.Connections {
		t.Fatalf("connections %d, the client says %d", n, cs.Connections)
	}
	// the breaker trips under CLIENT PAUSE: the gauge says open
	pol, err := bloomguard.NewPolicy(bloomguard.WithBreaker(2, time.Minute),
		bloomguard.WithChain(bloomguard.FailTimeout, bloomguard.ActionAssumePresent))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	srv.Must(t, "CLIENT", "PAUSE", "1000", "ALL")
	for i := 0; i < 3; i++ {
		if ok, err := f.Contains(ctx, []byte("zz")); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	m = collect(t, reader)
	if st := intPoint(t, m["bloomguard.breaker.state"], name); st != int64(bloomguard.BreakerOpen) {
		t.Fatalf("breaker state %d", st)
	}
	if n := intPoint(t, m["bloomguard.answers"], with(map[string]string{"bloomguard.answer.source": "assumed_present"})); n != 3 {
		t.Fatalf("assumed answers %d", n)
	}
	srv.Must(t, "PING")
}

// WithFilterNames(false): two filters in one series.
func TestInstrumentWithoutFilterNames(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c, err := bloomguard.Open(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(bgotel.NewProducer(c, bgotel.WithFilterNames(false))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	for _, n := range []string{"a", "b"} {
		f, err := c.Filter(n)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Init(ctx, 100, 0.01); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Contains(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	m := collect(t, reader)
	p := histPoint(t, m["db.client.operation.duration"], map[string]string{"db.operation.name": "contains"})
	if p.Count != 2 {
		t.Fatalf("%+v", p)
	}
	if _, ok := p.Attributes.Value("bloomguard.filter.name"); ok {
		t.Fatal("a filter name with WithFilterNames(false)")
	}
}
