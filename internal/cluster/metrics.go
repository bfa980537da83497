package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Insecure talks to a scheduler's secure port, whose certificate is
// self-signed.
var Insecure = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local test endpoint

// ServingFlags make a scheduler process serve on port and let /metrics (and
// pprof) be read without credentials, as a Prometheus with a bearer token
// would read them.
func ServingFlags(port int) []string {
	return []string{"--secure-port=" + strconv.Itoa(port), "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*"}
}

// WaitHealthy waits until the scheduler on port answers /healthz: it
// serves, though its informers may not have synced yet.
func WaitHealthy(ctx context.Context, port int, timeout time.Duration) error {
	return waitOK(ctx, port, "/healthz", "healthy", timeout)
}

// WaitReady waits until the scheduler on port answers /readyz, which
// kube-scheduler passes once every informer has synced and delivered its
// initial list to the handlers (its sched-handler-sync check), as a
// Deployment's readiness probe would see it. A fresh apiserver makes a
// custom resource's first list wait a second (Retry-After while its watch
// cache starts), so a scheduler watching CRDs may serve a second before it
// schedules.
func WaitReady(ctx context.Context, port int, timeout time.Duration) error {
	return waitOK(ctx, port, "/readyz", "ready", timeout)
}

func waitOK(ctx context.Context, port int, path, state string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := Insecure.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("scheduler on port %d not %s after %s", port, state, timeout)
}

// Scrape reads and parses a Prometheus text endpoint.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := Insecure.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Value is a scraped series' value — a gauge's or counter's, a
// histogram's sample count — summed over the series whose labels include
// all of labels.
func Value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
	var sum float64
series:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
