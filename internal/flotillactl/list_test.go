package flotillactl

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Pods come page by page, listPageSize at a time, each request continuing
// where the last ended, until the apiserver says there is no more; an
// error on any page is the list's.
func TestListPodsPageByPage(t *testing.T) {
	const total = 1234
	for _, tc := range []struct {
		name      string
		failOn    int // the page that fails, from 1 (0: none)
		wantPages int
	}{
		{name: "three pages", wantPages: 3},
		{name: "the second page fails", failOn: 2, wantPages: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			pages := 0
			client.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				pages++
				opts := action.(k8stesting.ListActionImpl).ListOptions
				require.Equal(t, int64(listPageSize), opts.Limit)
				start := 0
				if opts.Continue != "" {
					start, _ = strconv.Atoi(opts.Continue)
				}
				if pages == tc.failOn {
					return true, nil, fmt.Errorf("the apiserver went away")
				}
				page := &corev1.PodList{}
				for i := start; i < min(start+int(opts.Limit), total); i++ {
					page.Items = append(page.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p-%d", i)}})
				}
				if next := start + int(opts.Limit); next < total {
					page.Continue = strconv.Itoa(next)
				}
				return true, page, nil
			})
			list, err := listPods(context.Background(), client.CoreV1().Pods("ns"), metav1.ListOptions{FieldSelector: "spec.nodeName="})
			assert.Equal(t, tc.wantPages, pages)
			if tc.failOn != 0 {
				assert.ErrorContains(t, err, "went away")
				return
			}
			require.NoError(t, err)
			require.Len(t, list.Items, total)
			assert.Equal(t, "p-0", list.Items[0].Name)
			assert.Equal(t, fmt.Sprintf("p-%d", total-1), list.Items[total-1].Name)
		})
	}
}
