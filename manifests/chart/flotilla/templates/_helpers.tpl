{{/*
The scheduler's image: the repository at the digest when one is given,
else at the tag, or at the chart's appVersion.
*/}}
{{- define "flotilla.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The --feature-gates flag's value, gates sorted by name.
*/}}
{{- define "flotilla.featureGates" -}}
{{- $gates := list }}
{{- range $name, $on := .Values.featureGates }}
{{- $gates = append $gates (printf "%s=%t" $name $on) }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/*
The Gang plugin's args. Every profile of one binary shares the queue sort,
and kube-scheduler requires its args to be the same in each: both profiles
of replace-default render them from here.
*/}}
{{- define "flotilla.gangArgs" -}}
# Placed members wait this long for the rest of their gang when the
# PodGroup sets no scheduleTimeoutSeconds.
permitWaitingTimeSeconds: {{ .Values.gang.permitWaitingTimeSeconds }}
# A gang whose attempt failed lets others try for this long.
backoffSeconds: {{ .Values.gang.backoffSeconds }}
# No gang starts while this many members of gangs are placed and not
# yet bound: placing no faster than the apiserver binds.
maxMembersInFlight: {{ .Values.gang.maxMembersInFlight }}
# Room held for a gang that does not fit now (0 gangs: off).
reservation:
  maxGangs: {{ .Values.gang.reservation.maxGangs }}
  afterSeconds: {{ .Values.gang.reservation.afterSeconds }}
  maxClusterPercent: {{ .Values.gang.reservation.maxClusterPercent }}
{{- with .Values.gang.topologyLevels }}
# The cluster's topology node labels, widest first: a PodGroup
# annotated scheduling.flotilla.dev/topology-preferred with one of
# them falls back to the next wider one.
topologyLevels:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end }}

{{/*
The KubeSchedulerConfiguration, shipped as the flotilla-scheduler-config
ConfigMap (the kustomize base's scheduler-config.yaml and
scheduler-config-replace-default.yaml are this, rendered).
*/}}
{{- define "flotilla.schedulerConfig" -}}
{{- $replace := eq .Values.mode "replace-default" -}}
{{- if $replace -}}
# flotilla-scheduler instead of kube-scheduler: one binary serves the
# unchanged default-scheduler profile and the flotilla-scheduler profile from
# one cache, so no two schedulers race for the same node. It takes
# kube-scheduler's own lease: while the old scheduler still runs, only one of
# the two is active, which makes the switch-over safe.
{{- else -}}
# flotilla-scheduler beside the default scheduler: it schedules only pods with
# spec.schedulerName: flotilla-scheduler and holds its own lease, so it never
# competes with kube-scheduler for leadership.
{{- end }}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  # A gang's members bind together once its quorum is placed: at the default
  # 50 qps the bindings of a 1000-pod gang alone would take 20 s.
  qps: {{ .Values.clientConnection.qps }}
  burst: {{ .Values.clientConnection.burst }}
leaderElection:
  leaderElect: {{ .Values.leaderElection.enabled }}
{{- if $replace }}
  resourceNamespace: kube-system
{{- else }}
  resourceNamespace: {{ .Release.Namespace }}
{{- end }}
  resourceName: {{ include "flotilla.leaseName" . }}
profiles:
{{- if $replace }}
# Unchanged but for the queue sort, which every profile of one binary shares:
# Gang's orders plain pods exactly as PrioritySort does.
- schedulerName: default-scheduler
  plugins:
    queueSort:
      enabled:
      - name: Gang
      disabled:
      - name: "*"
  pluginConfig:
  - name: Gang
    args:
      {{- include "flotilla.gangArgs" . | nindent 6 }}
{{- end }}
{{- range $schedulerName := concat (list "flotilla-scheduler") .Values.schedulerNameAliases }}
{{- with $ }}
{{- if ne $schedulerName "flotilla-scheduler" }}
# The same profile under a name a job framework hard-codes (see
# schedulerNameAliases in the chart's values): one binary, one cache.
{{- end }}
- schedulerName: {{ $schedulerName }}
  plugins:
    multiPoint:
      enabled:
      # Weighted fair share among Queues: admission within deserved shares.
      # First, so that a gang its queue refuses starts no attempt (which
      # would fail and back off, and lose its turn in the queue).
      - name: Proportion
      # All-or-nothing PodGroups; also the queue sort, which orders plain
      # pods exactly as PrioritySort does.
      - name: Gang
      # The packing score, weighted against the profile's other scores.
      - name: Binpack
        weight: {{ .Values.binpack.weight }}
      # Gang- and queue-aware preemption and reclaim.
      - name: Preemption
    # One queue sort for the whole binary: Gang's replaces PrioritySort. It
    # is spelled out per extension point because every profile must
    # configure it identically.
    queueSort:
      enabled:
      - name: Gang
      disabled:
      - name: "*"
    postFilter:
      disabled:
      # Replaced by Preemption: DefaultPreemption evicts for one pod at a
      # time, would break running gangs and ignores queues.
      - name: DefaultPreemption
    # With the GenericWorkload gate on, kube-scheduler places the pods of a
    # native PodGroup (scheduling.k8s.io) in a pod-group cycle and skips
    # PostFilter for them: Preemption preempts for such a group from
    # podGroupPostFilter (MultiPoint enables it there) in DefaultPreemption's
    # place, and runs first under preFilter to keep each member's cycle
    # state for it; Gang, before it there, holds room for the group when
    # reservation is on. With the gate off neither runs.
    podGroupPostFilter:
      disabled:
      - name: DefaultPreemption
    # With TopologyAwareWorkloadScheduling on as well, the pod-group cycle
    # tries one placement per topology domain: Gang proposes them in the
    # in-tree TopologyPlacementGenerator's place (a profile has one
    # generator), leaving out the domains that cannot hold the group, and
    # Binpack ranks them (MultiPoint enables both there), in the place of
    # NodeResourcesFit's most-allocated placement score, which would put a
    # CPU-only gang on the free GPUs of a fuller zone.
    placementGenerate:
      disabled:
      - name: TopologyPlacementGenerator
    placementScore:
      disabled:
      - name: NodeResourcesFit
    preFilter:
      enabled:
      - name: Preemption
    score:
      disabled:
      # Both pull the other way: LeastAllocated spreads pods onto the
      # emptiest node and BalancedAllocation evens cpu against memory,
      # which fragments nodes that binpack is trying to fill.
      - name: NodeResourcesFit
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: Gang
    args:
      {{- include "flotilla.gangArgs" . | nindent 6 }}
  - name: Proportion
    args:
      # Pods that name no queue (own, PodGroup or namespace label) go here.
      defaultQueue: {{ .Values.proportion.defaultQueue | quote }}
      # Fairness over time (0s: off); see the chart's README.
      usageHalfLife: {{ .Values.proportion.usageHalfLife | quote }}
      usageWeight: {{ .Values.proportion.usageWeight }}
      usageStatusInterval: {{ .Values.proportion.usageStatusInterval | quote }}
      usageReclaimMinRuntime: {{ .Values.proportion.usageReclaimMinRuntime | quote }}
      demandHold: {{ .Values.proportion.demandHold | quote }}
  - name: Binpack
    args:
      {{- with .Values.binpack.resources }}
      resources:
      {{- toYaml . | nindent 6 }}
      {{- end }}
      # CPU-only pods keep off nodes with these resources while a node
      # without them fits, so no GPU pod is stranded. Empty: rank as
      # MostAllocated.
      scarceResources:
      {{- if .Values.binpack.scarceResources }}
      {{- toYaml .Values.binpack.scarceResources | nindent 6 }}
      {{- else }} []
      {{- end }}
      # Devices of every DRA DeviceClass (under its extendedResourceName or
      # deviceclass.resource.kubernetes.io/<class>): their weight, and
      # whether pods that do not ask for them keep off their nodes.
      deviceClasses:
        weight: {{ .Values.binpack.deviceClasses.weight }}
        scarce: {{ .Values.binpack.deviceClasses.scarce }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The leader-election lease's name: kube-scheduler's own when flotilla
replaces it, else flotilla-scheduler's.
*/}}
{{- define "flotilla.leaseName" -}}
{{ if eq .Values.mode "replace-default" }}kube-scheduler{{ else }}flotilla-scheduler{{ end }}
{{- end }}

{{/*
Fails the render on values that would run two schedulers at once or ask
for a PriorityClass the apiserver refuses; each message names the values.
*/}}
{{- define "flotilla.checkValues" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) }}
{{- fail (printf "leaderElection.enabled=false with replicas=%d: without the lease every replica schedules, so two schedulers would race for the same pods; set replicas=1 or leaderElection.enabled=true" (int .Values.replicas)) }}
{{- end }}
{{- if and .Values.priorityClass.create (hasPrefix "system-" .Values.priorityClassName) }}
{{- fail (printf "priorityClass.create=true with priorityClassName=%s: the apiserver reserves the system- prefix for its own classes; name the chart's class (e.g. priorityClassName=flotilla-scheduler)" .Values.priorityClassName) }}
{{- end }}
{{- if and .Values.priorityClass.create (not .Values.priorityClassName) }}
{{- fail "priorityClass.create=true with an empty priorityClassName: name the class to create" }}
{{- end }}
{{- end }}

{{/*
GOMEMLIMIT for the scheduler: 90% of the container's memory limit in MiB,
so the Go runtime collects harder before the kernel kills the container;
empty without a limit. Binary (Ki Mi Gi Ti) and decimal (k M G T)
suffixes and plain bytes are read.
*/}}
{{- define "flotilla.goMemLimit" -}}
{{- $limit := "" }}
{{- with .Values.resources }}{{ with .limits }}{{ $limit = toString (.memory | default "") }}{{ end }}{{ end }}
{{- if $limit }}
{{- $units := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 }}
{{- $suffix := regexFind "(Ki|Mi|Gi|Ti|k|M|G|T)$" $limit }}
{{- $number := trimSuffix $suffix $limit }}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" $number) }}
{{- fail (printf "resources.limits.memory=%s: not a quantity the chart reads (a number with Ki, Mi, Gi, Ti, k, M, G or T)" $limit) }}
{{- end }}
{{- $bytes := mulf (float64 $number) (get $units $suffix | default 1.0) }}
{{- printf "%dMiB" (int (floor (divf (mulf $bytes 0.9) 1048576.0))) }}
{{- end }}
{{- end }}

{{/*
Where the alerts' runbook_url points: prometheusRule.runbookBaseURL, else
the runbooks of the installed version (its tag, v<appVersion>).
*/}}
{{- define "flotilla.runbookBaseURL" -}}
{{- .Values.prometheusRule.runbookBaseURL | default (printf "https://github.com/flotilla-sched/flotilla/blob/v%s/docs/runbooks.md" .Chart.AppVersion) }}
{{- end }}
