package bench

import (
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// schedulerMetrics are what the scheduler's /metrics says about a run.
type schedulerMetrics struct {
	// Pod scheduling latency (scheduler_pod_scheduling_sli_duration_seconds:
	// from entering the queue to being scheduled, all attempts), seconds.
	p50, p90, p99 float64
	// Time inside scheduling algorithms and inside Bind, seconds summed
	// over pods.
	scheduling, binding float64
	// Time pods waited in Permit and spent in PreBind, seconds summed over
	// pods: with Bind, how long each pod's cycle state stays alive after
	// its scheduling cycle (a DRA pod's holds its allocator).
	permitWait, preBind float64
	heapInUse           float64
	// CPU the scheduler process used since it started, seconds; and the
	// requests its clients sent (rest_client_requests_total): writes
	// (POST, PUT, PATCH, DELETE) and GETs (gets and lists). On 2 cores
	// both are taken from what the apiserver, the controllers and the
	// kubelets have to work with.
	cpuSeconds    float64
	writes, reads float64
	// podGroupsScheduled: kube-scheduler's pod-group scheduling attempts
	// that placed their group (the in-tree gang scheduling of native
	// PodGroups).
	podGroupsScheduled float64
}

func scrape(url, profile string) (*schedulerMetrics, error) {
	if url == "" {
		return nil, nil
	}
	families, err := cluster.Scrape(url)
	if err != nil {
		return nil, err
	}
	m := &schedulerMetrics{}
	if f := families["scheduler_pod_scheduling_sli_duration_seconds"]; f != nil {
		buckets := mergeBuckets(f.GetMetric())
		m.p50, m.p90, m.p99 = quantile(buckets, 0.5), quantile(buckets, 0.9), quantile(buckets, 0.99)
	}
	if f := families["scheduler_scheduling_algorithm_duration_seconds"]; f != nil {
		for _, s := range f.GetMetric() {
			m.scheduling += s.GetHistogram().GetSampleSum()
		}
	}
	if f := families["scheduler_framework_extension_point_duration_seconds"]; f != nil {
		for _, s := range f.GetMetric() {
			if label(s, "profile") != profile {
				continue
			}
			switch label(s, "extension_point") {
			case "Bind":
				m.binding += s.GetHistogram().GetSampleSum()
			case "PreBind":
				m.preBind += s.GetHistogram().GetSampleSum()
			}
		}
	}
	if f := families["scheduler_permit_wait_duration_seconds"]; f != nil {
		for _, s := range f.GetMetric() {
			m.permitWait += s.GetHistogram().GetSampleSum()
		}
	}
	m.podGroupsScheduled = cluster.Value(families, "scheduler_podgroup_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"})
	if f := families["go_memstats_heap_inuse_bytes"]; f != nil && len(f.GetMetric()) > 0 {
		m.heapInUse = f.GetMetric()[0].GetGauge().GetValue()
	}
	if f := families["process_cpu_seconds_total"]; f != nil && len(f.GetMetric()) > 0 {
		m.cpuSeconds = f.GetMetric()[0].GetCounter().GetValue()
	}
	if f := families["rest_client_requests_total"]; f != nil {
		for _, s := range f.GetMetric() {
			switch label(s, "method") {
			case "GET":
				m.reads += s.GetCounter().GetValue()
			case "POST", "PUT", "PATCH", "DELETE":
				m.writes += s.GetCounter().GetValue()
			}
		}
	}
	return m, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

type bucket struct{ upper, count float64 }

// mergeBuckets adds up the cumulative buckets of every series.
func mergeBuckets(series []*dto.Metric) []bucket {
	sums := map[float64]float64{}
	for _, s := range series {
		hasInf := false
		for _, b := range s.GetHistogram().GetBucket() {
			sums[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			hasInf = hasInf || math.IsInf(b.GetUpperBound(), 1)
		}
		if !hasInf {
			sums[math.Inf(1)] += float64(s.GetHistogram().GetSampleCount())
		}
	}
	out := make([]bucket, 0, len(sums))
	for upper, count := range sums {
		out = append(out, bucket{upper, count})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].upper < out[j].upper })
	return out
}

// quantile interpolates linearly inside the bucket the rank falls in, as
// Prometheus's histogram_quantile does.
func quantile(buckets []bucket, q float64) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		return 0
	}
	rank := q * buckets[len(buckets)-1].count
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.upper, 1) {
				return lower
			}
			if b.count == below {
				return b.upper
			}
			return lower + (b.upper-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.upper, b.count
	}
	return lower
}
