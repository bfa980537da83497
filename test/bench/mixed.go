package bench

import (
	"context"
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// mixedStream is M1: disaggregated serving gangs on DRA, members that
// differ by role, devices and domain. Each zone has two nodes of 8 h100
// devices and one of 8 l40 (one DeviceClass; the model is a device
// attribute). Each gang is three Jobs under one PodGroup of 7: prefill (2
// pods of 8 cpu + 32Gi, each claiming 4 devices whose model is h100) and
// decode (4 pods of 2 cpu + 8Gi, each claiming 2 l40) each required in one
// zone, and a router (1 cpu + 1Gi). A zone holds the prefill of two gangs
// and the decode of one, so the gangs run in waves as earlier ones finish
// (each pod runs runSeconds). A count of the class sees 24 devices in
// every zone; only member-by-member planning tells where each role goes.
type mixedStream struct {
	zones, gangs int
	runSeconds   float64
}

// The claim templates of M1's two roles.
const (
	prefillTemplate = "prefill-gpus"
	decodeTemplate  = "decode-gpus"
)

// mixedRoles declares M1's roles on its PodGroups.
const mixedRoles = `[
  {"name": "prefill", "minMember": 2, "topologyRequired": "` + cluster.ZoneLabel + `", "selector": {"matchLabels": {"role": "prefill"}}},
  {"name": "decode", "minMember": 4, "topologyRequired": "` + cluster.ZoneLabel + `", "selector": {"matchLabels": {"role": "decode"}}},
  {"name": "router", "minMember": 1, "selector": {"matchLabels": {"role": "router"}}}]`

// runMixed runs M1. Measured: from the first Job created to the last pod
// bound (every gang placed), pods/s over that, and the slowest gang.
func runMixed(e *env, v variant, s mixedStream) (*result, error) {
	node := cluster.NodeSpec{Name: "gpu", CPU: "64", Memory: "256Gi"}
	err := e.createNodesLabelled(3*s.zones, node, func(i int) map[string]string {
		return map[string]string{cluster.ZoneLabel: fmt.Sprintf("zone-%d", i/3)}
	})
	if err != nil {
		return nil, err
	}
	if err := e.publishModels(); err != nil {
		return nil, err
	}
	var specs []cluster.WorkloadSpec
	for g := range s.gangs {
		gang := groupName(g)
		for _, role := range []cluster.WorkloadSpec{
			{Name: gang + "-prefill", Replicas: 2, CPU: "8", Memory: "32Gi", ClaimTemplate: prefillTemplate},
			{Name: gang + "-decode", Replicas: 4, CPU: "2", Memory: "8Gi", ClaimTemplate: decodeTemplate},
			{Name: gang + "-router", Replicas: 1, CPU: "1", Memory: "1Gi"},
		} {
			role.Namespace, role.SchedulerName, role.RunSeconds = e.namespace, e.scheduler, s.runSeconds
			if v.gangs {
				role.PodGroup = gang
			}
			specs = append(specs, role)
		}
	}
	err = e.startWithGroups(v, s.gangs, func(g int) *schedv1alpha1.PodGroup {
		pg := cluster.PodGroup(e.namespace, groupName(g), 7)
		pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: mixedRoles}
		return pg
	})
	if err != nil {
		return nil, err
	}
	err = parallel(e.ctx, len(specs), func(ctx context.Context, j int) error {
		job := cluster.Job(specs[j])
		// The role label the PodGroup's roles select by, as an operator
		// labels its worker groups.
		job.Spec.Template.Labels["role"] = roleOfJob(specs[j].Name)
		_, err := e.client.BatchV1().Jobs(e.namespace).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	defer e.profileRun(v)()
	pods := 7 * s.gangs
	// Waves of one gang per zone, each runSeconds, and the pace of DRA's
	// filter with the default profile (about 10 pods/s, see D1).
	waves := (s.gangs + s.zones - 1) / s.zones
	timeout := 2*time.Minute + time.Duration(float64(waves)*(s.runSeconds+5))*time.Second
	if err := e.pods.WaitBound(e.ctx, pods, timeout); err != nil {
		return nil, err
	}
	if err := e.waitJobsComplete(len(specs), timeout); err != nil {
		return nil, err
	}
	r, _ := e.jobsResult(pods)
	r.Extra["idealSeconds"] = float64(waves-1) * s.runSeconds
	return r, e.measureScheduler(r, v)
}

// roleOfJob is the role an M1 Job's name ends with.
func roleOfJob(name string) string {
	for _, role := range []string{"prefill", "decode", "router"} {
		if len(name) > len(role) && name[len(name)-len(role):] == role {
			return role
		}
	}
	return ""
}

// publishModels creates M1's DeviceClass, its two claim templates (each
// selecting one model by a CEL selector, as users write them) and each
// node's ResourceSlice: 8 devices, h100 on the first two nodes of each
// zone, l40 on the third.
func (e *env) publishModels() error {
	_, err := e.client.ResourceV1().DeviceClasses().Create(e.ctx, cluster.DeviceClass(cluster.DRADriver, ""), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, t := range []struct {
		name, model string
		count       int64
	}{{prefillTemplate, "h100", 4}, {decodeTemplate, "l40", 2}} {
		tmpl := cluster.ClaimTemplate(e.namespace, t.name, cluster.DRADriver, t.count)
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes[%q].model == %q`, cluster.DRADriver, t.model),
		}}}
		if _, err := e.client.ResourceV1().ResourceClaimTemplates(e.namespace).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return parallel(e.ctx, len(e.nodes), func(ctx context.Context, i int) error {
		model := "h100"
		if i%3 == 2 {
			model = "l40"
		}
		slice := cluster.DeviceSlice(e.nodes[i], 8, 1)
		for d := range slice.Spec.Devices {
			slice.Spec.Devices[d].Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To(model)}
		}
		_, err := e.client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
}

// mixedMeasured compares the time until every gang is bound with the
// default profile's on the same pods, which knows no gangs, roles or
// domains.
func mixedMeasured(m map[string]*result) string {
	f, d := m[flotillaDRA.name], m[defaultDRA.name]
	ratio := f.Seconds / d.Seconds
	return fmt.Sprintf("every gang bound in %.1f s vs %.1f s = %.2f x (waves alone: %.0f s); slowest gang %.1f s vs %.1f s",
		f.Seconds, d.Seconds, ratio, f.Extra["idealSeconds"], f.GangSecs, d.GangSecs)
}
