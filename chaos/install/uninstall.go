package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// Uninstall removes what Install made and waits until it is gone.
//
// Chaos objects still in the cluster are deleted first, while the
// controller runs, so that it recovers what they injected and removes
// their finalizers; if the controller is not available nothing can recover
// them, so their finalizers are removed instead (and that is logged). Then
// the webhook configurations go (nothing must call a webhook that is going
// away), then every other object, the namespace and the CRDs.
func Uninstall(ctx context.Context, cfg *rest.Config, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	r := &run{log: o.Log, steps: &[]Step{}}
	c, err := newClient(clientConfig(cfg))
	if err != nil {
		return err
	}
	// Names and kinds are all an uninstall needs: any certificates do.
	objs, err := render(o, &certificates{})
	if err != nil {
		return err
	}
	g := groupForUninstall(objs)
	up := controllerAvailable(ctx, c, o.Namespace)
	for _, group := range []struct {
		name string
		crds []*unstructured.Unstructured
	}{{"chaos objects", g.topLevel}, {"per-pod chaos objects", g.perPod}} {
		err = r.step(group.name, func() (string, error) {
			return removeChaos(ctx, c, r, group.crds, g.webhookConfigs, up)
		})
		if err != nil {
			return err
		}
	}
	// The workloads go with their pods (foreground deletion) while their
	// RBAC and namespace still exist: a controller that loses its
	// permissions, or whose events are refused by a terminating namespace,
	// takes its whole grace period to stop. With no pods left, the
	// namespace goes quickly.
	for _, group := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{
		{"webhook configurations", g.webhookConfigs},
		{"workloads and their pods", g.workloads},
		{"RBAC, Services and Secrets", g.others},
		{"namespace", g.namespace},
		{"CRDs", g.crds},
	} {
		err := r.step("delete "+group.name, func() (string, error) {
			n, err := deleteAll(ctx, c, group.objs)
			if err != nil {
				return "", err
			}
			if err := waitGone(ctx, c, group.name, group.objs); err != nil {
				return "", err
			}
			return fmt.Sprintf("deleted %d of %d objects (the rest were absent), all gone", n, len(group.objs)), nil
		})
		if err != nil {
			return err
		}
	}
	r.printf("uninstalled Chaos Mesh from %s in %s", o.Namespace, time.Since(start).Round(time.Millisecond))
	return nil
}

// uninstallGroups are the rendered objects by the step of Uninstall that
// removes them.
type uninstallGroups struct {
	crds, webhookConfigs, workloads, others, namespace []*unstructured.Unstructured
	// topLevel are the CRDs of the kinds users create, removed first: the
	// controller recovers them through the per-pod kinds (perPod), which
	// must still be there.
	topLevel, perPod []*unstructured.Unstructured
}

// groupForUninstall sorts the rendered objects into uninstallGroups.
func groupForUninstall(objs []*unstructured.Unstructured) uninstallGroups {
	var g uninstallGroups
	for _, u := range objs {
		switch u.GetKind() {
		case "CustomResourceDefinition":
			g.crds = append(g.crds, u)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			g.webhookConfigs = append(g.webhookConfigs, u)
		case "Deployment", "DaemonSet":
			g.workloads = append(g.workloads, u)
		case "Namespace":
			g.namespace = append(g.namespace, u)
		default:
			g.others = append(g.others, u)
		}
	}
	for _, crd := range g.crds {
		if kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind"); internalKinds[kind] {
			g.perPod = append(g.perPod, crd)
		} else {
			g.topLevel = append(g.topLevel, crd)
		}
	}
	return g
}

// internalKinds are the objects the controller makes for each target pod
// (and each workflow step) and keeps until the chaos is recovered.
var internalKinds = map[string]bool{"PodNetworkChaos": true, "PodIOChaos": true, "PodHttpChaos": true, "WorkflowNode": true}

func controllerAvailable(ctx context.Context, c client.Reader, ns string) bool {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ControllerDeployment}, d); err != nil {
		return false
	}
	return d.Status.AvailableReplicas > 0
}

// removeChaos deletes every object of the Chaos Mesh CRDs in every
// namespace and waits until they are gone. Without a controller, it first
// removes the webhook configurations (their failing calls would block the
// updates) and then the objects' finalizers.
func removeChaos(ctx context.Context, c client.Client, r *run, crds, webhookConfigs []*unstructured.Unstructured, controllerUp bool) (string, error) {
	list := func(ctx context.Context) ([]*unstructured.Unstructured, error) {
		var out []*unstructured.Unstructured
		for _, crd := range crds {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listKind(crd))
			if err := c.List(ctx, l); err != nil {
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					continue
				}
				return nil, fmt.Errorf("listing %s: %w", l.GetKind(), err)
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		}
		return out, nil
	}
	found, err := list(ctx)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "none found", nil
	}
	if !controllerUp {
		r.printf("the controller is not available: nothing can recover the %d chaos objects left, removing their finalizers", len(found))
		if _, err := deleteAll(ctx, c, webhookConfigs); err != nil {
			return "", err
		}
		for _, u := range found {
			if len(u.GetFinalizers()) == 0 {
				continue
			}
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
			if err := c.Patch(ctx, u, patch); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("removing the finalizers of %s: %w", objectKey(u), err)
			}
		}
	}
	if _, err := deleteAll(ctx, c, found); err != nil {
		return "", err
	}
	err = framework.Poll(ctx, "the chaos objects to be recovered and deleted", pollInterval, func(ctx context.Context) (bool, string, error) {
		left, err := list(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var names []string
		for _, u := range left {
			names = append(names, fmt.Sprintf("%s finalizers %v", objectKey(u), u.GetFinalizers()))
		}
		return len(left) == 0, strings.Join(names, "\n"), nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("deleted %d chaos objects", len(found)), nil
}

// listKind is the list kind of a CRD's storage version.
func listKind(crd *unstructured.Unstructured) schema.GroupVersionKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "listKind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if storage, _ := vm["storage"].(bool); storage || version == "" {
			version, _ = vm["name"].(string)
		}
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

// deleteAll deletes objs and says how many existed (absent ones are
// skipped). Workloads go in the foreground: they are gone once their pods
// are.
func deleteAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (int, error) {
	n := 0
	for _, u := range objs {
		policy := metav1.DeletePropagationBackground
		if k := u.GetKind(); k == "Deployment" || k == "DaemonSet" {
			policy = metav1.DeletePropagationForeground
		}
		err := c.Delete(ctx, u.DeepCopy(), client.PropagationPolicy(policy))
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		case err != nil:
			return n, fmt.Errorf("deleting %s: %w", objectKey(u), err)
		default:
			n++
		}
	}
	return n, nil
}

// waitGone waits until none of objs exists.
func waitGone(ctx context.Context, c client.Reader, what string, objs []*unstructured.Unstructured) error {
	return framework.Poll(ctx, what+" to be gone", pollInterval, func(ctx context.Context) (bool, string, error) {
		v, err := versions(ctx, c, objs)
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, u := range objs {
			if v[objectKey(u)].exists {
				left = append(left, objectKey(u))
			}
		}
		slices.Sort(left)
		return len(left) == 0, "still present: " + strings.Join(left, ", "), nil
	})
}
