package fleet

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/config/crd"
	"flotilla.io/flotilla/test/testworld"
)

// installCRDs creates the policy API's CRDs in the host and waits until
// they are established.
func installCRDs(ctx context.Context, host *testworld.Cluster) error {
	crds := crd.Policies()
	c, err := apiextensionsclient.NewForConfig(host.RESTConfig())
	if err != nil {
		return err
	}
	for _, d := range crds {
		if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", d.Name, err)
		}
	}
	for _, d := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", d.Name, err)
		}
	}
	return nil
}
