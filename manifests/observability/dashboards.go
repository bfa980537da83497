// Package observability is flotilla's observability pack: the Grafana
// dashboards (built here with the Grafana foundation SDK, written into the
// chart by `make manifests`) and the tools that check the pack against the
// scheduler: every PromQL expression of the rendered dashboards and
// PrometheusRule (Expressions) parses and names only metrics (MetricNames)
// that the scheduler's /metrics serves (Missing).
//
// The alerts live in the chart (templates/prometheusrule.yaml), where their
// thresholds are values; manifests/observability/*.yaml are the chart's
// dashboards and rules rendered for the kustomize path.
package observability

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Dashboard is one generated dashboard: its file name in the chart's
// dashboards/ directory and its JSON model.
type Dashboard struct {
	File string
	JSON []byte
}

// Dashboards builds the pack's dashboards, in a fixed order.
func Dashboards() ([]Dashboard, error) {
	var out []Dashboard
	for _, d := range []struct {
		file    string
		builder *dashboard.DashboardBuilder
	}{
		{"queues.json", queuesDashboard()},
		{"gangs.json", gangsDashboard()},
		{"scheduler.json", schedulerDashboard()},
	} {
		model, err := d.builder.Build()
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", d.file, err)
		}
		data, err := json.MarshalIndent(model, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", d.file, err)
		}
		out = append(out, Dashboard{File: d.file, JSON: append(data, '\n')})
	}
	return out, nil
}

// The dashboards' variables. Every query filters on $job: kube-scheduler
// exports the same scheduler_* series, and one Prometheus often scrapes
// both. Only the leading replica schedules, so flotilla's gauges are taken
// with max over the replicas (a fail-over leaves the old leader's series
// to go stale).
const (
	job      = `job=~"$job"`
	interval = "$__rate_interval"
)

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// newDashboard is a dashboard with the variables every one of them has:
// the Prometheus data source and the scrape job of flotilla-scheduler.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"flotilla", "scheduling"}).
		Refresh("30s").
		Time("now-6h", "now").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(labelValues("job", "Job", "flotilla_podgroup_status_writes_total", "job", false))
}

// labelValues is a variable listing the values of a label of a metric.
func labelValues(name, label, metric, labelName string, multi bool) *dashboard.QueryVariableBuilder {
	query := fmt.Sprintf("label_values(%s, %s)", metric, labelName)
	v := dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
	if multi {
		v = v.Multi(true).IncludeAll(true)
	}
	return v
}

// query is one target of a panel.
type query struct {
	expr, legend string
}

// graph is a time series panel of the queries.
func graph(title, description, unit string, width uint32, queries ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Height(8).
		Span(width).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementBottom).Calcs([]string{"lastNotNull", "max"}))
	for _, q := range queries {
		p = p.WithTarget(target(q))
	}
	return p
}

// single is a stat panel of one query's last value.
func single(title, description, unit string, width uint32, q query, thresholds ...dashboard.Threshold) *stat.PanelBuilder {
	p := stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Height(4).
		Span(width).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(target(q))
	if len(thresholds) > 0 {
		p = p.Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(thresholds))
	}
	return p
}

func target(q query) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(q.expr).LegendFormat(q.legend).Datasource(datasource)
}

// steps are stat thresholds: green below at, red from it.
func steps(at float64) []dashboard.Threshold {
	return []dashboard.Threshold{{Color: "green"}, {Value: cog.ToPtr(at), Color: "red"}}
}

func quantile(q float64, bucket, by string) string {
	return fmt.Sprintf(`histogram_quantile(%v, sum by (le%s) (rate(%s{%s}[%s])))`, q, by, bucket, job, interval)
}

func queuesDashboard() *dashboard.DashboardBuilder {
	queue := `queue=~"$queue"`
	gauge := func(metric, by, extra string) string {
		return fmt.Sprintf(`max by (%s) (%s{%s, %s%s})`, by, metric, job, queue, extra)
	}
	ofResource := `, resource="$resource"`
	admission := func(q float64) string {
		return fmt.Sprintf(`histogram_quantile(%v, sum by (le, queue) (rate(flotilla_queue_admission_wait_seconds_bucket{%s, %s}[%s])))`, q, job, queue, interval)
	}
	return newDashboard("flotilla-queues", "flotilla / Queues",
		"Proportion's fair share: what each Queue deserves, holds and asks for, per resource, and the gangs waiting in it.").
		WithVariable(labelValues("queue", "Queue", "flotilla_queue_deserved", "queue", true)).
		WithVariable(labelValues("resource", "Resource", "flotilla_queue_deserved", "resource", true)).
		WithRow(dashboard.NewRowBuilder("Shares of $resource").Repeat("resource")).
		WithPanel(graph("Deserved and allocated: $resource",
			"Deserved: the queue's water-filled share (cpu in cores). Allocated: what its placed pods request. A queue holding less than it deserves while it has pending gangs is starved; above it, it borrows and may be reclaimed.",
			"short", 12,
			query{gauge("flotilla_queue_deserved", "queue", ofResource), "{{queue}} deserved"},
			query{gauge("flotilla_queue_allocated", "queue", ofResource), "{{queue}} allocated"})).
		WithPanel(graph("Requested, guarantee and capability: $resource",
			"Requested: placed and pending pods' requests. Guarantee: what the queue gets whatever others ask. Capability: its ceiling (none: unlimited).",
			"short", 12,
			query{gauge("flotilla_queue_requested", "queue", ofResource), "{{queue}} requested"},
			query{gauge("flotilla_queue_guaranteed", "queue", ofResource), "{{queue}} guarantee"},
			query{gauge("flotilla_queue_capability", "queue", ofResource), "{{queue}} capability"})).
		WithRow(dashboard.NewRowBuilder("Gangs and evictions")).
		WithPanel(graph("Pending gangs", "Gangs of the queue short of their quorum: waiting for room, for their share, or for their members.",
			"short", 8, query{gauge("flotilla_queue_pending_gangs", "queue", ""), "{{queue}}"})).
		WithPanel(graph("Running gangs", "Gangs of the queue at their quorum (succeeded members count).",
			"short", 8, query{gauge("flotilla_queue_running_gangs", "queue", ""), "{{queue}}"})).
		WithPanel(graph("Time to admission", "From a gang's PodGroup creation to its quorum placed and sent to bind, per queue: what FlotillaQueueAdmissionSlow alerts on (its p90 over an hour).",
			"s", 8,
			query{admission(0.5), "{{queue}} p50"},
			query{admission(0.9), "{{queue}} p90"})).
		WithPanel(graph("Evictions", "Pods evicted by flotilla: preemption (a higher-priority pod of the same queue) and reclaim (a queue below its deserved share takes back what another borrowed).",
			"short", 8, query{fmt.Sprintf(`sum by (kind) (rate(flotilla_preemption_victims_total{%s}[%s]))`, job, interval), "{{kind}}"})).
		WithPanel(single("Queues not Valid", "Queues whose spec cannot be honoured (their Valid condition is False): kubectl flotilla queues shows why.",
			"short", 8, query{fmt.Sprintf(`count(%s == 0) or vector(0)`, gauge("flotilla_queue_valid", "queue", "")), ""}, steps(1)...)).
		WithPanel(single("Queue-resources below guarantee with pending demand", "Pairs of queue and resource holding less than their guarantee while they ask for more: what FlotillaQueueBelowGuarantee alerts on once it lasts.",
			"short", 8, query{fmt.Sprintf(`count((%s < %s) and (%s > %s)) or vector(0)`,
				gauge("flotilla_queue_allocated", "queue, resource", ""), gauge("flotilla_queue_guaranteed", "queue, resource", ""),
				gauge("flotilla_queue_requested", "queue, resource", ""), gauge("flotilla_queue_allocated", "queue, resource", "")), ""}, steps(1)...))
}

func gangsDashboard() *dashboard.DashboardBuilder {
	return newDashboard("flotilla-gangs", "flotilla / Gangs",
		"Gang's all-or-nothing placement: how long gangs wait, why attempts fail, and where the PodGroups stand.").
		WithPanel(graph("Gang wait", "From a gang's placing attempt starting to its quorum being placed: how long its first members held nodes waiting.",
			"s", 12,
			query{quantile(0.5, "flotilla_gang_wait_seconds_bucket", ""), "p50"},
			query{quantile(0.9, "flotilla_gang_wait_seconds_bucket", ""), "p90"},
			query{quantile(0.99, "flotilla_gang_wait_seconds_bucket", ""), "p99"})).
		WithPanel(graph("Gangs placed", "Gangs reaching their quorum per second.",
			"ops", 12, query{fmt.Sprintf(`sum(rate(flotilla_gang_wait_seconds_count{%s}[%s]))`, job, interval), "gangs/s"})).
		WithPanel(graph("Failed attempts by reason", "does_not_fit: the quorum fits nowhere now; member_unplaceable: a member fits no node; lost_place: a placed member lost its node; timed_out: the quorum was not placed within the schedule timeout.",
			"ops", 12, query{fmt.Sprintf(`sum by (reason) (rate(flotilla_gang_rejections_total{%s}[%s]))`, job, interval), "{{reason}}"})).
		WithPanel(graph("Members waiting in Permit", "kube-scheduler's Permit wait of gang members, by result: members hold their node here until their quorum is placed.",
			"s", 12, query{quantile(0.99, "scheduler_permit_wait_duration_seconds_bucket", ", result"), "p99 {{result}}"})).
		WithPanel(graph("Binding backlog", "Members of gangs placed and not yet bound (waiting in Permit, or binding), and gang attempts held per second because they reached maxMembersInFlight: a backlog held at the limit means the apiserver binds slower than gangs place.",
			"short", 12,
			query{fmt.Sprintf(`max(flotilla_gang_members_in_flight{%s})`, job), "members in flight"},
			query{fmt.Sprintf(`sum(rate(flotilla_gang_attempts_paced_total{%s}[%s]))`, job, interval), "attempts held/s"})).
		WithPanel(graph("Quorum checks", "How long one gang quorum check takes (placing the members its quorum needs, member by member, device allocator included; made without the gangs' lock), and checks made again because the gangs' accounting changed while they ran.",
			"s", 12,
			query{quantile(0.99, "flotilla_gang_quorum_check_seconds_bucket", ""), "p99"},
			query{fmt.Sprintf(`sum(rate(flotilla_gang_quorum_checks_overtaken_total{%s}[%s]))`, job, interval), "checks made again/s"})).
		WithPanel(graph("Reservations", "Gangs holding room for their quorum until running pods end (reservation), and how long a reservation lasted, from its first plan to its quorum placed: a reservation that lasts keeps idle room from smaller work.",
			"short", 12,
			query{fmt.Sprintf(`max(flotilla_gang_reservations{%s})`, job), "gangs holding room"},
			query{quantile(0.9, "flotilla_gang_reservation_seconds_bucket", ""), "p90 held (s)"})).
		WithPanel(graph("Held room idle", "Room held for gangs that was free and kept from other pods, per resource (cpu in millicores): what reservations cost while the pods a gang waits for end.",
			"short", 12, query{fmt.Sprintf(`sum by (resource) (rate(flotilla_gang_reservation_idle_resource_seconds_total{%s}[%s]))`, job, interval), "{{resource}}"})).
		WithPanel(graph("PodGroups by phase", "Every PodGroup of the cluster by the phase flotilla wrote (none yet counts as Pending).",
			"short", 16, query{fmt.Sprintf(`max by (phase) (flotilla_podgroups{%s})`, job), "{{phase}}"}).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))).
		WithPanel(single("Longest gang wait", "The longest wait of a gang with all its members but not its quorum, in multiples of its schedule timeout; FlotillaGangWaitingTooLong alerts above the chart's prometheusRule.gangWaitTimeouts (3 by default).",
			"x", 8, query{fmt.Sprintf(`max(flotilla_gang_longest_wait_timeouts{%s})`, job), ""}, steps(3)...))
}

func schedulerDashboard() *dashboard.DashboardBuilder {
	profile := `profile=~"$profile"`
	return newDashboard("flotilla-scheduler", "flotilla / Scheduler health",
		"flotilla-scheduler as a kube-scheduler: attempts, latency, binds, its writes to the apiserver and its leader.").
		WithVariable(labelValues("profile", "Profile", "scheduler_schedule_attempts_total", "profile", true)).
		WithPanel(graph("Scheduling attempts", "Attempts by result: scheduled, unschedulable (no node fits, or a policy holds the pod), error.",
			"ops", 12, query{fmt.Sprintf(`sum by (result) (rate(scheduler_schedule_attempts_total{%s, %s}[%s]))`, job, profile, interval), "{{result}}"})).
		WithPanel(graph("Pod scheduling latency (SLI)", "From a pod entering the queue to its binding, gating excluded: the scheduler's latency SLI.",
			"s", 12,
			query{quantile(0.5, "scheduler_pod_scheduling_sli_duration_seconds_bucket", ""), "p50"},
			query{quantile(0.99, "scheduler_pod_scheduling_sli_duration_seconds_bucket", ""), "p99"})).
		WithPanel(graph("Binds", "Bind calls per second by status, from the framework's Bind extension point.",
			"ops", 8, query{fmt.Sprintf(`sum by (status) (rate(scheduler_framework_extension_point_duration_seconds_count{%s, %s, extension_point="Bind"}[%s]))`, job, profile, interval), "{{status}}"})).
		WithPanel(graph("Bind latency", "p99 of the Bind extension point (with PreBind's DRA claim writes before it).",
			"s", 8, query{fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (rate(scheduler_framework_extension_point_duration_seconds_bucket{%s, %s, extension_point="Bind"}[%s])))`, job, profile, interval), "p99"})).
		WithPanel(graph("Pending pods", "Pods in the scheduler's queues: active, backoff, unschedulable, gated (gang members held until their gang can go).",
			"short", 8, query{fmt.Sprintf(`sum by (queue) (scheduler_pending_pods{%s})`, job), "{{queue}}"})).
		WithPanel(graph("Status writes", "PodGroup and Queue status patches, and failed status writes by writer (each is retried; FlotillaStatusWriteErrors alerts on them).",
			"ops", 12,
			query{fmt.Sprintf(`sum(rate(flotilla_podgroup_status_writes_total{%s}[%s]))`, job, interval), "PodGroup writes"},
			query{fmt.Sprintf(`sum by (writer) (rate(flotilla_status_write_errors_total{%s}[%s]))`, job, interval), "errors {{writer}}"})).
		WithPanel(graph("API requests", "The scheduler's requests to the apiserver by status code: 429s mean the apiserver throttles it.",
			"ops", 12, query{fmt.Sprintf(`sum by (code) (rate(rest_client_requests_total{%s}[%s]))`, job, interval), "{{code}}"})).
		WithPanel(graph("Leader", "1 for the replica holding the lease. Only the leader schedules; no replica at 1 means no pod is scheduled (FlotillaNoLeader).",
			"short", 24, query{fmt.Sprintf(`max by (pod, name) (leader_election_master_status{%s})`, job), "{{pod}} {{name}}"}))
}
