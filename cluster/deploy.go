package cluster

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// RenderKustomization builds a kustomization directory (as `kubectl
// kustomize` does) into objects, in the order kustomize emits them.
func RenderKustomization(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON, so that numbers are int64 as everywhere else in
		// unstructured content (kustomize's own maps hold ints).
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// SetImage replaces the image of every container and init container whose
// image is from (ignoring its tag) in the workloads among objs.
func SetImage(objs []*unstructured.Unstructured, from, to string) int {
	return editContainers(objs, []string{"containers", "initContainers"}, from, func(c map[string]any) { c["image"] = to })
}

// PullIfNotPresent sets imagePullPolicy IfNotPresent on the containers and
// init containers whose image is image (with any tag), and returns how
// many: an image loaded into a kind cluster is on its nodes and in no
// registry, so a manifest's "Always" would leave its pods unable to start.
func PullIfNotPresent(objs []*unstructured.Unstructured, image string) int {
	return editContainers(objs, []string{"containers", "initContainers"}, image, func(c map[string]any) { c["imagePullPolicy"] = "IfNotPresent" })
}

// AppendArgs appends args to the containers whose image is image (ignoring
// its tag) in the workloads among objs, and returns how many it changed.
func AppendArgs(objs []*unstructured.Unstructured, image string, args ...string) int {
	return editContainers(objs, []string{"containers"}, image, func(c map[string]any) {
		existing, _ := c["args"].([]any)
		for _, a := range args {
			existing = append(existing, a)
		}
		c["args"] = existing
	})
}

// SetEnv sets environment variables on the containers whose image is
// image (ignoring its tag) in the workloads among objs: a variable the
// container has gets the value in place, its valueFrom dropped; one it
// lacks is added, in name order. It returns how many containers it
// changed.
func SetEnv(objs []*unstructured.Unstructured, image string, env map[string]string) int {
	return editContainers(objs, []string{"containers"}, image, func(c map[string]any) {
		existing, _ := c["env"].([]any)
		set := map[string]bool{}
		for i, e := range existing {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			name, _ := m["name"].(string)
			if v, ok := env[name]; ok {
				existing[i] = map[string]any{"name": name, "value": v}
				set[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(env)) {
			if !set[name] {
				existing = append(existing, map[string]any{"name": name, "value": env[name]})
			}
		}
		c["env"] = existing
	})
}

// SameImage says whether ref is the image name with any tag or none:
// gauntlet.dev/operator matches gauntlet.dev/operator:v1, not
// gauntlet.dev/operator-tools:v1.
func SameImage(ref, name string) bool {
	return ref == name || strings.HasPrefix(ref, name+":")
}

// editContainers applies edit to every container, in the pod template
// fields named, whose image is image (with any tag), and returns how many
// it edited.
func editContainers(objs []*unstructured.Unstructured, fields []string, image string, edit func(map[string]any)) int {
	n := 0
	for _, o := range objs {
		for _, field := range fields {
			path := []string{"spec", "template", "spec", field}
			list, found, _ := unstructured.NestedSlice(o.Object, path...)
			if !found {
				continue
			}
			for i, c := range list {
				cm, ok := c.(map[string]any)
				if !ok {
					continue
				}
				if img, _ := cm["image"].(string); SameImage(img, image) {
					edit(cm)
					list[i] = cm
					n++
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, list, path...)
		}
	}
	return n
}

// DeployOptions tune Deploy.
type DeployOptions struct {
	// FieldManager of the server-side apply (gauntlet-e2e when empty).
	FieldManager string
	// DryRun asks the API server to validate and admit without persisting.
	DryRun bool
	// Timeout bounds the wait for CRDs to be established (1m when zero).
	Timeout time.Duration
	// Namespace is where a namespaced object that names none goes, as
	// with kubectl apply -n (plain manifests often leave it out).
	Namespace string
}

// Deployment is what Deploy did and what the API server said about it.
type Deployment struct {
	// Applied lists kind/namespace/name of every object applied.
	Applied []string
	// Warnings are the API server's warnings (Warning headers), for example
	// PodSecurity's "would violate PodSecurity ..." for a pod template that
	// breaks its namespace's standard.
	Warnings []string
}

// Deploy applies objects server-side: namespaces and CRDs first (waiting
// until each CRD is established), then everything else in installOrder,
// and collects the API server's warnings.
func Deploy(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, o DeployOptions) (*Deployment, error) {
	if o.FieldManager == "" {
		o.FieldManager = "gauntlet-e2e"
	}
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	warnings := &warningCollector{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)

	objs = withNamespaces(objs)
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition"
	}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int {
		switch fa, fb := first(a), first(b); {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return installRank(a) - installRank(b)
	})
	d := &Deployment{}
	var dryRun []string
	if o.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	crdsDone := false
	for i, u := range ordered {
		if !first(u) && !crdsDone {
			crdsDone = true
			if !o.DryRun {
				if err := waitEstablished(ctx, dyn, ordered, o.Timeout); err != nil {
					return d, err
				}
			}
			cached.Invalidate()
			mapper.Reset()
			if err := unserved(mapper, ordered[i:]); err != nil {
				return d, err
			}
		}
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return d, fmt.Errorf("mapping %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" && o.Namespace != "" {
				u.SetNamespace(o.Namespace)
			}
			ri = dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true, DryRun: dryRun}); err != nil {
			return d, fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		d.Applied = append(d.Applied, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName())
	}
	d.Warnings = warnings.all()
	return d, nil
}

// installOrder is the order in which kinds are applied, Helm's: what a
// pod needs (its ServiceAccount, Secrets, ConfigMaps, claims, RBAC) before
// the workloads that make pods, and admission webhooks last, once what
// serves them is there. A file that lists its Deployment before its
// ServiceAccount (spotahome's all-redis-operator-resources.yaml) would
// otherwise have its first pods refused ("serviceaccount not found").
var installOrder = []string{
	"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodDisruptionBudget", "ServiceAccount",
	"Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
	"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "DaemonSet", "Pod",
	"ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job",
	"CronJob", "IngressClass", "Ingress", "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

// installRank is a kind's place in installOrder; kinds it does not name
// (custom resources) come after every one it does.
func installRank(u *unstructured.Unstructured) int {
	if i := slices.Index(installOrder, u.GetKind()); i >= 0 {
		return i
	}
	return len(installOrder)
}

// unserved fails, before any of objs is applied, when the cluster serves
// the kinds of some of them neither itself nor through a CRD among the
// manifests (which are established by then): an object of cert-manager or
// of the Prometheus operator on a cluster without it. It names every one,
// so that they are dealt with at once rather than one apply at a time.
func unserved(mapper meta.RESTMapper, objs []*unstructured.Unstructured) error {
	var missing []string
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			missing = append(missing, fmt.Sprintf("%s %s (%s)", gvk.GroupVersion(), gvk.Kind, path.Join(u.GetNamespace(), u.GetName())))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the cluster serves no %s, and no CRD among the manifests defines them: install what serves them first, or leave those objects out of the manifests (an Operator file's spec.exclude) and switch off what needs them",
		strings.Join(missing, ", "))
}

// withNamespaces adds a Namespace for each namespace the objects are in
// that none of them creates: kustomize's namespace field sets one on
// every object, and a project may install the Namespace itself elsewhere
// (RabbitMQ's config/default names rabbitmq-system, which its
// config/installation creates).
func withNamespaces(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	made := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			made[u.GetName()] = true
		}
	}
	out := objs
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" && !made[ns] {
			made[ns] = true
			n := &unstructured.Unstructured{}
			n.SetAPIVersion("v1")
			n.SetKind("Namespace")
			n.SetName(ns)
			out = append(slices.Clip(out), n)
		}
	}
	return out
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, timeout time.Duration) error {
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := framework.PollFor(ctx, "CRD "+u.GetName()+" to be established", timeout, 250*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			got, err := dyn.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, crd); err != nil {
				return false, "", err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("conditions %v", crd.Status.Conditions), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// warningCollector keeps every Warning header the API server sends.
type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, message)
}

func (w *warningCollector) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}
