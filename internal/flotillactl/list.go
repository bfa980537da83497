package flotillactl

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// listPageSize is how many pods one list request asks for, as kubectl
// get's --chunk-size: a large cluster's pods never come as one response.
const listPageSize = 500

// listPods lists the pods opts selects page by page, following the
// apiserver's continue token, into one list.
func listPods(ctx context.Context, pods typedcorev1.PodInterface, opts metav1.ListOptions) (*corev1.PodList, error) {
	opts.Limit = listPageSize
	all := &corev1.PodList{}
	for {
		page, err := pods.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		all.ResourceVersion = page.ResourceVersion
		if page.Continue == "" {
			return all, nil
		}
		opts.Continue = page.Continue
	}
}
