package cluster

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"kind": "Deployment",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "init", "image": "gauntlet.dev/operator"}},
			"containers": []any{
				map[string]any{"name": "manager", "image": "gauntlet.dev/operator:dev", "args": []any{"--leader-elect"}},
				map[string]any{"name": "sidecar", "image": "gauntlet.dev/operator-sidecar:1"},
			},
		}}},
	}}
}

func containers(o *unstructured.Unstructured, field string) []any {
	l, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
	return l
}

func TestSetImageAndAppendArgs(t *testing.T) {
	g := NewWithT(t)
	o := deployment()
	g.Expect(SetImage([]*unstructured.Unstructured{o}, "gauntlet.dev/operator", "gauntlet.dev/operator:v2")).To(Equal(2),
		"the container and the init container, whatever their tag; not an image that only shares the prefix")
	g.Expect(containers(o, "containers")[0]).To(HaveKeyWithValue("image", "gauntlet.dev/operator:v2"))
	g.Expect(containers(o, "initContainers")[0]).To(HaveKeyWithValue("image", "gauntlet.dev/operator:v2"))
	g.Expect(containers(o, "containers")[1]).To(HaveKeyWithValue("image", "gauntlet.dev/operator-sidecar:1"))

	g.Expect(AppendArgs([]*unstructured.Unstructured{o}, "gauntlet.dev/operator:v2", "--bug=hot-loop")).To(Equal(1), "init containers keep their args")
	g.Expect(containers(o, "containers")[0]).To(HaveKeyWithValue("args", []any{"--leader-elect", "--bug=hot-loop"}))
	g.Expect(containers(o, "initContainers")[0]).NotTo(HaveKey("args"))

	g.Expect(PullIfNotPresent([]*unstructured.Unstructured{o}, "gauntlet.dev/operator:v2")).To(Equal(2))
	g.Expect(containers(o, "containers")[0]).To(HaveKeyWithValue("imagePullPolicy", "IfNotPresent"))
	g.Expect(containers(o, "containers")[1]).NotTo(HaveKey("imagePullPolicy"), "another image keeps its policy")
}

func TestPinToControlPlane(t *testing.T) {
	g := NewWithT(t)
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "op"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"tolerations": []any{map[string]any{"key": "a", "operator": "Exists"}}}}}}},
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "ds"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "svc"}}},
	}
	g.Expect(PinToControlPlane(objs)).To(Equal(1), "Deployments only")
	sel, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "template", "spec", "nodeSelector")
	g.Expect(sel).To(Equal(map[string]string{"node-role.kubernetes.io/control-plane": ""}))
	tols, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "template", "spec", "tolerations")
	g.Expect(tols).To(HaveLen(2), "its own toleration kept, the control plane's added")
	_, found, _ := unstructured.NestedMap(objs[1].Object, "spec", "template", "spec", "nodeSelector")
	g.Expect(found).To(BeFalse(), "a DaemonSet is left alone")
}

// A namespace the objects are in but none creates is created first; one
// they create is not twice.
func TestWithNamespaces(t *testing.T) {
	g := NewWithT(t)
	obj := func(kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	in := []*unstructured.Unstructured{obj("ServiceAccount", "op-system", "op"), obj("Namespace", "", "other"),
		obj("Service", "other", "svc"), obj("ClusterRole", "", "role"), obj("ConfigMap", "op-system", "cfg")}
	out := withNamespaces(in)
	g.Expect(out).To(HaveLen(6))
	g.Expect(out[5].GetKind()).To(Equal("Namespace"))
	g.Expect(out[5].GetName()).To(Equal("op-system"))
	g.Expect(in).To(HaveLen(5), "the caller's list is left as it was")
	g.Expect(withNamespaces(out)).To(HaveLen(6))
}

// A variable the manifests set (by value or from a field) takes the
// Operator file's value in place; one they lack is added; other images'
// containers keep theirs.
func TestSetEnv(t *testing.T) {
	g := NewWithT(t)
	o := deployment()
	c := containers(o, "containers")
	c[0].(map[string]any)["env"] = []any{
		map[string]any{"name": "WATCH_NAMESPACE", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.namespace"}}},
		map[string]any{"name": "OPERATOR_NAME", "value": "op"},
	}
	_ = unstructured.SetNestedSlice(o.Object, c, "spec", "template", "spec", "containers")

	g.Expect(SetEnv([]*unstructured.Unstructured{o}, "gauntlet.dev/operator:dev", map[string]string{"WATCH_NAMESPACE": "", "LOG_LEVEL": "debug"})).To(Equal(1))
	g.Expect(containers(o, "containers")[0]).To(HaveKeyWithValue("env", []any{
		map[string]any{"name": "WATCH_NAMESPACE", "value": ""},
		map[string]any{"name": "OPERATOR_NAME", "value": "op"},
		map[string]any{"name": "LOG_LEVEL", "value": "debug"},
	}))
	g.Expect(containers(o, "containers")[1]).NotTo(HaveKey("env"))
	g.Expect(containers(o, "initContainers")[0]).NotTo(HaveKey("env"), "init containers keep theirs, as with args")
}

// What a pod needs goes before the workloads that make pods, webhooks
// last, custom resources after every kind Kubernetes serves; the file's
// order is kept within a kind.
func TestInstallRank(t *testing.T) {
	g := NewWithT(t)
	obj := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	objs := []*unstructured.Unstructured{
		obj("Deployment", "op"), obj("ValidatingWebhookConfiguration", "v"), obj("RedisFailover", "r"),
		obj("ClusterRoleBinding", "op"), obj("ServiceAccount", "op"), obj("ClusterRole", "op"),
		obj("Service", "metrics"), obj("ConfigMap", "a"), obj("ConfigMap", "b"),
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return installRank(a) - installRank(b) })
	var got []string
	for _, u := range objs {
		got = append(got, u.GetKind()+"/"+u.GetName())
	}
	g.Expect(got).To(Equal([]string{"ServiceAccount/op", "ConfigMap/a", "ConfigMap/b", "ClusterRole/op", "ClusterRoleBinding/op",
		"Service/metrics", "Deployment/op", "ValidatingWebhookConfiguration/v", "RedisFailover/r"}))
}
