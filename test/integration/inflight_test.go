package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Annotations the volume binder and the PersistentVolume controller write
// on a claim (k8s.io/kubernetes/pkg/controller/volume/persistentvolume/util).
const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annBindCompleted = "pv.kubernetes.io/bind-completed"
)

// A pod still being bound is no victim until it is bound, and the
// preemptor that needs its room does not wait for the scheduler's
// five-minute flush once it is. A low-priority Job's pod whose volume is
// provisioned on first use sits in VolumeBinding's PreBind (reserved on
// the node, not bound) until its claim is bound; a high-priority Job's pod
// that needs the node's room meanwhile is told it waits for a pod being
// scheduled. Once the volume is provisioned and the Job's pod bound, the
// preemptor is tried again at once (a pod becoming bound is no event its
// filters listen to), evicts it and is bound; the evicted Job's
// replacement waits.
//
// The test plays the volume's provisioner and the PersistentVolume
// controller's binding of the claim, which the harness does not run: it
// is that step's timing, not its content, that the test controls.
func TestPreemptorWaitsForAVictimStillBindingThenEvictsIt(t *testing.T) {
	h := startRealisticCluster(t, cluster.NodeSpec{Name: "node-0", CPU: "4", Memory: "16Gi"})
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	claim := createClaimProvisionedOnFirstUse(t, h, "scratch")
	deleted := watchDeletions(t, h)

	etl := cluster.Job(cluster.WorkloadSpec{Name: "etl", Replicas: 1, CPU: "3", Memory: "6Gi", PriorityClassName: "low", IgnoreDisruptions: true})
	etl.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
	}}}
	etl.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createJob(t, h, etl)
	// VolumeBinding's PreBind names the node on the claim, then waits for
	// the claim to be bound: from here the pod is reserved on node-0 and
	// is not bound.
	claim = waitForClaim(t, h, claim.Name, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Annotations[annSelectedNode] == "node-0"
	})

	_, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "serve", Replicas: 1, CPU: "2", Memory: "4Gi", PriorityClassName: "high"})
	require.NoError(t, err)
	require.NoError(t, cluster.Poll(h.Ctx, 100*time.Millisecond, bindTimeout, func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=serve"})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pod of serve yet", err
		}
		cond := cluster.PodScheduledCondition(&pods.Items[0])
		if cond == nil || cond.Status != corev1.ConditionFalse {
			return false, "serve's pod not tried yet", nil
		}
		return strings.Contains(cond.Message, "1 pods it may evict are still being scheduled"), cond.Message, nil
	}), "the preemptor is told it waits for the pod being bound")
	assert.Empty(t, deleted.names("etl-"), "a pod still being bound is no victim")
	assert.Zero(t, bound(t, h, "app=serve"))

	provisionAndBind(t, h, claim)
	provisioned := time.Now()
	placed, err := h.WaitForPodsBound(h.Ctx, "default", "app=serve", 1, bindTimeout)
	require.NoError(t, err, "once etl's pod is bound the preemptor is tried again at once, not at the five-minute flush")
	t.Logf("serve bound %s after etl's volume was bound", time.Since(provisioned).Round(time.Millisecond))
	for _, node := range placed {
		assert.Equal(t, "node-0", node)
	}
	victims := deleted.names("etl-")
	require.Len(t, victims, 1, "etl's pod is the victim once bound")
	c := disruption(deleted.get(victims[0]))
	require.NotNil(t, c, "victim %s has DisruptionTarget", victims[0])
	assert.Equal(t, corev1.PodReasonPreemptionByScheduler, c.Reason)
	assert.Contains(t, c.Message, "preempted by pod default/serve-")

	// The Job replaces its evicted pod (the disruption does not count
	// against its backoff limit); the replacement has no room and no
	// lower-priority pod to take it from.
	require.Eventually(t, func() bool {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: "app=etl"})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Name != victims[0] && p.DeletionTimestamp == nil {
				return true
			}
		}
		return false
	}, bindTimeout, 200*time.Millisecond, "etl's replacement pod")
	assert.Zero(t, bound(t, h, "app=etl"), "the replacement waits")
	assert.Equal(t, 1, bound(t, h, "app=serve"))
}

// createClaimProvisionedOnFirstUse creates a StorageClass whose volumes an
// external provisioner makes once a pod using them has a node
// (WaitForFirstConsumer), and a 1Gi claim of it.
func createClaimProvisionedOnFirstUse(t *testing.T, h *harness.Harness, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	firstConsumer := storagev1.VolumeBindingWaitForFirstConsumer
	class, err := h.Client.StorageV1().StorageClasses().Create(h.Ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "provisioned-on-first-use"},
		Provisioner:       "example.com/provisioner",
		VolumeBindingMode: &firstConsumer,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	claim, err := h.Client.CoreV1().PersistentVolumeClaims("default").Create(h.Ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class.Name,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return claim
}

func waitForClaim(t *testing.T, h *harness.Harness, name string, done func(*corev1.PersistentVolumeClaim) bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	var claim *corev1.PersistentVolumeClaim
	require.NoError(t, cluster.Poll(h.Ctx, 100*time.Millisecond, bindTimeout, func(ctx context.Context) (bool, string, error) {
		var err error
		claim, err = h.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return done(claim), fmt.Sprintf("claim %s annotations %v, volume %q", name, claim.Annotations, claim.Spec.VolumeName), nil
	}))
	return claim
}

// provisionAndBind does what the provisioner and the PersistentVolume
// controller would: a volume for the claim, reserved for it, and the claim
// bound to it (the binder's PreBind waits for the claim's volumeName and
// bind-completed annotation).
func provisionAndBind(t *testing.T, h *harness.Harness, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	pv, err := h.Client.CoreV1().PersistentVolumes().Create(h.Ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      claim.Spec.Resources.Requests,
			AccessModes:                   claim.Spec.AccessModes,
			StorageClassName:              *claim.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/scratch/" + claim.Name}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pv.Status.Phase = corev1.VolumeBound
	_, err = h.Client.CoreV1().PersistentVolumes().UpdateStatus(h.Ctx, pv, metav1.UpdateOptions{})
	require.NoError(t, err)

	claim.Spec.VolumeName = pv.Name
	claim.Annotations[annBindCompleted] = "yes"
	claim, err = h.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(h.Ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.AccessModes = pv.Spec.AccessModes
	claim.Status.Capacity = pv.Spec.Capacity
	_, err = h.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(h.Ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)
}
