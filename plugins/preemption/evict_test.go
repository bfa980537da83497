package preemption

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Evicting a victim marks it with DisruptionTarget saying who preempts it
// and why, then deletes it by UID (that pod, not a replacement of the same
// name), and records an event on it; a victim already gone is no error.
func TestEvictOne(t *testing.T) {
	victim := st.MakePod().Namespace("ns").Name("victim").UID("victim").Priority(10).Obj()
	preemptorPod := st.MakePod().Namespace("ns").Name("big").UID("big").Priority(1000).SchedulerName("flotilla-scheduler").Obj()
	otherTenant := st.MakePod().Namespace("other").Name("secret-project").UID("secret").Priority(1000).SchedulerName("flotilla-scheduler").Obj()
	tests := []struct {
		name        string
		who         *preemptor
		present     bool
		wantMessage string
		wantEvent   string
	}{
		{name: "preempted in its queue", who: &preemptor{pod: preemptorPod, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/big"}, priority: 1000, queue: "train"}, present: true,
			wantMessage: `flotilla-scheduler: preempted by gang ns/big (priority 1000) of the same queue "train"`, wantEvent: "Normal Preempted"},
		{name: "preempted, no queues", who: &preemptor{pod: preemptorPod, what: state.Workload{Kind: "pod", Namespace: "ns", Name: "ns/big"}, priority: 1000}, present: true,
			wantMessage: "flotilla-scheduler: preempted by pod ns/big (priority 1000)", wantEvent: "Normal Preempted"},
		{name: "preempted by another namespace's gang, which the victim's readers are not told the name of",
			who: &preemptor{pod: otherTenant, what: state.Workload{Kind: "gang", Namespace: "other", Name: "other/secret-project"}, priority: 1000, queue: "train"}, present: true,
			wantMessage: `flotilla-scheduler: preempted by a gang of another namespace (priority 1000) of the same queue "train"`, wantEvent: "Normal Preempted"},
		{name: "already gone", who: &preemptor{pod: preemptorPod, what: state.Workload{Kind: "pod", Namespace: "ns", Name: "ns/big"}, priority: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.present {
				_, err := client.CoreV1().Pods("ns").Create(context.Background(), victim.DeepCopy(), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			recorder := events.NewFakeRecorder(10)
			p := &Preemption{handle: handletest.New(t, "flotilla-scheduler", frameworkruntime.WithClientSet(client), frameworkruntime.WithEventRecorder(recorder))}
			require.NoError(t, p.evictOne(context.Background(), tt.who, victim, kindPreemption, &world{}))
			_, err := client.CoreV1().Pods("ns").Get(context.Background(), "victim", metav1.GetOptions{})
			if !tt.present {
				assert.True(t, apierrors.IsNotFound(err))
				assert.Empty(t, recorder.Events)
				return
			}
			assert.True(t, apierrors.IsNotFound(err), "deleted")
			var patch string
			for _, a := range client.Actions() {
				if a.GetVerb() == "delete" {
					deleted := a.(k8stesting.DeleteAction)
					require.NotNil(t, deleted.GetDeleteOptions().Preconditions, "deleted by UID")
					assert.Equal(t, victim.UID, *deleted.GetDeleteOptions().Preconditions.UID)
					assert.NotEmpty(t, patch, "marked before it is deleted")
				}
				if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
					patch = string(a.(k8stesting.PatchAction).GetPatch())
				}
			}
			var marked struct {
				Status corev1.PodStatus `json:"status"`
			}
			require.NoError(t, json.Unmarshal([]byte(patch), &marked))
			require.Len(t, marked.Status.Conditions, 1)
			condition := marked.Status.Conditions[0]
			assert.Equal(t, corev1.DisruptionTarget, condition.Type)
			assert.Equal(t, corev1.PodReasonPreemptionByScheduler, condition.Reason)
			assert.Equal(t, tt.wantMessage, condition.Message)
			select {
			case e := <-recorder.Events:
				assert.Contains(t, e, tt.wantEvent)
				assert.Contains(t, e, tt.wantMessage[len("flotilla-scheduler: "):])
			default:
				t.Fatal("no event on the victim")
			}
		})
	}
}
