package bgprom_test

import (
	"bytes"
	"context"
	"testing"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	"github.com/bloomguard/bloomguard/bindings/go/otel/internal/redistest"
	bgprom "github.com/bloomguard/bloomguard/bindings/go/otel/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The registry's text output, parsed back: families by name.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	out, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" { // empty: absent (Prometheus's rule)
			out[l.GetName()] = l.GetValue()
		}
	}
	return out
}

func find(t *testing.T, mf *dto.MetricFamily, kv map[string]string) *dto.Metric {
	t.Helper()
	if mf == nil {
		t.Fatalf("no such family (want %v)", kv)
	}
	var found []*dto.Metric
	for _, m := range mf.GetMetric() {
		l := labels(m)
		ok := len(l) == len(kv)
		for k, v := range kv {
			ok = ok && l[k] == v
		}
		if ok {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of %s with %v", len(found), mf.GetName(), kv)
	}
	return found[0]
}

func TestCollectorTextOutput(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c, err := bloomguard.Open(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(bgprom.NewCollector(c))
	f, err := c.Filter("prom-go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	missing, err := c.Filter("prom-go-missing")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := scrape(t, reg)["db_client_operation_duration_seconds"]; ok {
		t.Fatal("a duration series before any operation")
	}
	if _, err := f.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := f.Contains(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := missing.Count(ctx); err == nil {
		t.Fatal("Count of a missing filter succeeded")
	}
	if err := f.Rotate(ctx, 1000, 0.01, bloomguard.Locked, func(r *bloomguard.Rotation) error { return r.Add([]byte("x")) }); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, reg)
	base := map[string]string{"db_system_name": "redis", "bloomguard_filter_name": "prom-go"}
	plus := func(kv map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	h := find(t, fams["db_client_operation_duration_seconds"], plus(map[string]string{"db_operation_name": "contains"})).GetHistogram()
	bs := h.GetBucket()
	if h.GetSampleCount() != 4 || len(bs) != len(bloomguard.HistogramBounds)+1 || bs[len(bs)-1].GetCumulativeCount() != 4 {
		t.Fatalf("contains histogram: %v", h)
	}
	for i := 1; i < len(bs); i++ {
		if bs[i].GetCumulativeCount() < bs[i-1].GetCumulativeCount() {
			t.Fatalf("buckets decrease: %v", bs)
		}
	}
	miss := find(t, fams["db_client_operation_duration_seconds"], map[string]string{"db_system_name": "redis",
		"bloomguard_filter_name": "prom-go-missing", "db_operation_name": "count", "error_type": "not_initialized"})
	if miss.GetHistogram().GetSampleCount() != 1 {
		t.Fatal("the failed count")
	}
	rot := plus(map[string]string{"bloomguard_rotation_strategy": "locked", "bloomguard_rotation_outcome": "committed"})
	if n := find(t, fams["bloomguard_rotations_total"], rot).GetCounter().GetValue(); n != 1 {
		t.Fatalf("rotations %v", n)
	}
	if n := find(t, fams["bloomguard_answers_total"], plus(map[string]string{"bloomguard_answer_source": "redis"})).GetCounter().GetValue(); n != 4 {
		t.Fatalf("answers %v", n)
	}
	if n := find(t, fams["db_client_connection_count"], map[string]string{"db_system_name": "redis"}).GetGauge().GetValue(); n < 1 {
		t.Fatalf("connections %v", n)
	}
	if n := find(t, fams["bloomguard_breaker_state"], base).GetGauge().GetValue(); n != 0 {
		t.Fatalf("breaker %v", n)
	}
	// a closed filter's series go
	missing.Close()
	for _, m := range scrape(t, reg)["db_client_operation_duration_seconds"].GetMetric() {
		if labels(m)["bloomguard_filter_name"] == "prom-go-missing" {
			t.Fatal("a closed filter is still exported")
		}
	}
}
