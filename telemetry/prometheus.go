package telemetry

import (
	"bufio"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// PrometheusHandler serves the metrics collected by reader in the Prometheus
// text exposition format (version 0.0.4), as RabbitMQ's /metrics does. It
// needs no authentication.
func PrometheusHandler(reader *sdkmetric.ManualReader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(r.Context(), &rm); err != nil {
			http.Error(w, "collect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if r.Method == http.MethodHead {
			return
		}
		bw := bufio.NewWriter(w)
		WritePrometheus(bw, &rm)
		_ = bw.Flush() // the client went away
	})
}

// Collect is a convenience for tests and tools: it collects reader once.
func Collect(ctx context.Context, reader *sdkmetric.ManualReader) (metricdata.ResourceMetrics, error) {
	var rm metricdata.ResourceMetrics
	err := reader.Collect(ctx, &rm)
	return rm, err
}

type promSample struct {
	labels string
	value  string
}

type promFamily struct {
	name, help, typ string
	samples         []promSample
}

// WritePrometheus writes rm in the Prometheus text format: one family per
// instrument (sums as counter when monotonic, else gauge; gauges as gauge),
// families and series sorted. Instrument names are used as they are, after
// replacing characters Prometheus does not allow with '_'; epitaph names its
// instruments with their Prometheus names. Histograms are not written
// (epitaph records none).
func WritePrometheus(w *bufio.Writer, rm *metricdata.ResourceMetrics) {
	fams := map[string]*promFamily{}
	family := func(m *metricdata.Metrics, typ string) *promFamily {
		name := promName(m.Name)
		f := fams[name]
		if f == nil {
			f = &promFamily{name: name, help: m.Description, typ: typ}
			fams[name] = f
		}
		return f
	}
	for _, sm := range rm.ScopeMetrics {
		for i := range sm.Metrics {
			m := &sm.Metrics[i]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				f := family(m, sumType(d.IsMonotonic))
				for _, p := range d.DataPoints {
					f.samples = append(f.samples, promSample{promLabels(p.Attributes), strconv.FormatInt(p.Value, 10)})
				}
			case metricdata.Sum[float64]:
				f := family(m, sumType(d.IsMonotonic))
				for _, p := range d.DataPoints {
					f.samples = append(f.samples, promSample{promLabels(p.Attributes), promFloat(p.Value)})
				}
			case metricdata.Gauge[int64]:
				f := family(m, "gauge")
				for _, p := range d.DataPoints {
					f.samples = append(f.samples, promSample{promLabels(p.Attributes), strconv.FormatInt(p.Value, 10)})
				}
			case metricdata.Gauge[float64]:
				f := family(m, "gauge")
				for _, p := range d.DataPoints {
					f.samples = append(f.samples, promSample{promLabels(p.Attributes), promFloat(p.Value)})
				}
			}
		}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f := fams[n]
		if f.help != "" {
			w.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
		}
		w.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
		slices.SortFunc(f.samples, func(a, b promSample) int { return strings.Compare(a.labels, b.labels) })
		for _, s := range f.samples {
			w.WriteString(f.name + s.labels + " " + s.value + "\n")
		}
	}
}

func sumType(monotonic bool) string {
	if monotonic {
		return "counter"
	}
	return "gauge"
}

func promFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// promName maps a name onto [a-zA-Z_:][a-zA-Z0-9_:]*.
func promName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// promLabels renders a set as {k="v",...} in key order ("" when empty).
func promLabels(set attribute.Set) string {
	if set.Len() == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteByte('{')
	iter := set.Iter()
	for i := 0; iter.Next(); i++ {
		kv := iter.Attribute()
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(promLabelName(string(kv.Key)))
		sb.WriteString(`="`)
		sb.WriteString(escapeLabel(kv.Value.String()))
		sb.WriteByte('"')
	}
	sb.WriteByte('}')
	return sb.String()
}

func promLabelName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
