package install

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

var testOptions = Options{
	Namespace:       "chaos-x",
	ControllerImage: "example.test/cm:v1",
	DaemonImage:     "example.test/daemon:v2",
	PauseImage:      "example.test/pause:3",
	RuntimeSocket:   "/var/run/k3s/containerd/containerd.sock",
}

func mustRender(t *testing.T, o Options) ([]*unstructured.Unstructured, *certificates) {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := mustGenerate(t, o.Namespace, time.Now())
	objs, err := render(o, c)
	if err != nil {
		t.Fatal(err)
	}
	return objs, c
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", objectKey(u), err)
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

func TestRenderedObjects(t *testing.T) {
	g := NewWithT(t)
	objs, _ := mustRender(t, testOptions)
	var kinds []string
	seen := map[string]bool{}
	for _, u := range objs {
		g.Expect(u.GetAPIVersion()).NotTo(BeEmpty(), objectKey(u))
		g.Expect(u.GetName()).NotTo(BeEmpty(), objectKey(u))
		g.Expect(seen[objectKey(u)]).To(BeFalse(), "rendered twice: "+objectKey(u))
		seen[objectKey(u)] = true
		if clusterScoped[u.GetKind()] {
			g.Expect(u.GetNamespace()).To(BeEmpty(), objectKey(u))
		} else {
			g.Expect(u.GetNamespace()).To(Equal("chaos-x"), objectKey(u))
		}
		if u.GetKind() != "CustomResourceDefinition" {
			g.Expect(u.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "gauntlet"), objectKey(u))
			kinds = append(kinds, u.GetKind())
		}
	}
	slices.Sort(kinds)
	g.Expect(slices.Compact(kinds)).To(Equal([]string{
		"ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment", "MutatingWebhookConfiguration",
		"Namespace", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration",
	}))
	// Order: the CRDs, then the namespace; the Secrets before the workloads.
	index := func(kind string) int {
		return slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == kind })
	}
	g.Expect(index("CustomResourceDefinition")).To(Equal(0))
	g.Expect(index("Namespace")).To(BeNumerically(">", index("CustomResourceDefinition")))
	g.Expect(index("Secret")).To(BeNumerically("<", index("Deployment")))
	g.Expect(index("Secret")).To(BeNumerically("<", index("DaemonSet")))
}

// TestNoTemplateLeftovers walks every string of every rendered object: no
// template markers, no printf errors, and no default namespace where
// another was asked for.
func TestNoTemplateLeftovers(t *testing.T) {
	objs, _ := mustRender(t, testOptions)
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue // not templated; their descriptions are upstream's prose
		}
		walkStrings(u.Object, "", func(path, s string) {
			for _, marker := range []string{"{{", "}}", "<no value>", "%!", "chaos-mesh.chaos-x"} {
				if strings.Contains(s, marker) {
					t.Errorf("%s %s = %q contains %q", objectKey(u), path, s, marker)
				}
			}
			allowed := strings.HasSuffix(path, ".app.kubernetes.io/name") || path == ".spec.template.spec.containers[0].name"
			if s == "chaos-mesh" && !allowed {
				t.Errorf("%s %s = %q: the default namespace, not chaos-x", objectKey(u), path, s)
			}
		})
	}
}

func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case map[string]any:
		for k, x := range v {
			f(path+"."+k, k)
			walkStrings(x, path+"."+k, f)
		}
	case []any:
		for i, x := range v {
			walkStrings(x, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

func TestWorkloads(t *testing.T) {
	g := NewWithT(t)
	objs, certs := mustRender(t, testOptions)

	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment", ControllerDeployment))
	for k, v := range dep.Spec.Selector.MatchLabels {
		g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
	}
	pod := dep.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	cm := pod.Containers[0]
	g.Expect(cm.Image).To(Equal("example.test/cm:v1"))
	g.Expect(cm.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	env := map[string]string{}
	for _, e := range cm.Env {
		env[e.Name] = e.Value
	}
	g.Expect(env).To(HaveKeyWithValue("POD_FAILURE_PAUSE_IMAGE", "example.test/pause:3"))
	g.Expect(env).To(HaveKeyWithValue("CERTS_DIR", "/etc/webhook/certs"))
	g.Expect(env).To(HaveKeyWithValue("WEBHOOK_PORT", "10250"))
	g.Expect(env).To(HaveKeyWithValue("CHAOS_MESH_CA_CERT", "/etc/chaos-daemon/cert/ca.crt"))
	g.Expect(env).To(HaveKey("NAMESPACE")) // from the downward API
	g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue("chaos.gauntlet.dev/certificates", certs.fingerprint()))
	g.Expect(mounts(pod, cm)).To(Equal(map[string]string{
		"/etc/webhook/certs":     "secret " + WebhookSecret,
		"/etc/chaos-daemon/cert": "secret " + DaemonClientSecret,
	}))

	ds := convert[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", DaemonSet))
	g.Expect(ds.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "chaos-mesh", "app.kubernetes.io/component": "chaos-daemon"}))
	pod = ds.Spec.Template.Spec
	g.Expect(pod.HostPID).To(BeTrue())
	g.Expect(pod.Tolerations).To(ContainElement(corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}),
		"a daemon on the control plane too, for faults on pods there")
	d := pod.Containers[0]
	g.Expect(d.Image).To(Equal("example.test/daemon:v2"))
	g.Expect(*d.SecurityContext.Privileged).To(BeTrue())
	g.Expect(strings.Join(d.Command, " ")).To(ContainSubstring("--runtime containerd --runtime-socket-path /host-run/containerd.sock"))
	g.Expect(strings.Join(d.Command, " ")).To(ContainSubstring("--ca /etc/chaos-daemon/cert/ca.crt --cert /etc/chaos-daemon/cert/tls.crt --key /etc/chaos-daemon/cert/tls.key"))
	g.Expect(ds.Spec.Template.Annotations).To(HaveKeyWithValue("chaos.gauntlet.dev/certificates", certs.fingerprint()))
	g.Expect(mounts(pod, d)).To(Equal(map[string]string{
		"/host-run":              "hostPath /var/run/k3s/containerd",
		"/host-sys":              "hostPath /sys",
		"/lib/modules":           "hostPath /lib/modules",
		"/etc/chaos-daemon/cert": "secret " + DaemonSecret,
	}))

	ns := convert[corev1.Namespace](t, find(t, objs, "Namespace", "chaos-x"))
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))

	// The controller finds the daemons through the EndpointSlices of a
	// Service named chaos-daemon (slices chaos-daemon-*), on port 31767.
	svc := convert[corev1.Service](t, find(t, objs, "Service", "chaos-daemon"))
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.Selector).To(Equal(ds.Spec.Selector.MatchLabels))
	g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(31767))
	web := convert[corev1.Service](t, find(t, objs, "Service", ControllerService))
	g.Expect(web.Spec.Selector).To(Equal(dep.Spec.Selector.MatchLabels))

	for _, u := range objs {
		if u.GetKind() == "ClusterRoleBinding" || u.GetKind() == "RoleBinding" {
			b := convert[rbacv1.ClusterRoleBinding](t, u)
			g.Expect(b.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "chaos-controller-manager", Namespace: "chaos-x"}))
		}
	}
}

func mounts(pod corev1.PodSpec, c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				out[m.MountPath] = "secret " + v.Secret.SecretName
			case v.HostPath != nil:
				out[m.MountPath] = "hostPath " + v.HostPath.Path
			}
		}
	}
	return out
}

func TestSecrets(t *testing.T) {
	g := NewWithT(t)
	objs, certs := mustRender(t, testOptions)
	for name, pair := range map[string]keyPair{WebhookSecret: certs.Webhook, DaemonSecret: certs.DaemonServer, DaemonClientSecret: certs.DaemonClient} {
		u := find(t, objs, "Secret", name)
		g.Expect(u.Object["metadata"]).NotTo(HaveKey("creationTimestamp"))
		s := convert[corev1.Secret](t, u)
		g.Expect(s.Data).To(Equal(map[string][]byte{"ca.crt": certs.CA, "tls.crt": pair.Cert, "tls.key": pair.Key}), name)
	}
}

func TestWebhookConfigurations(t *testing.T) {
	g := NewWithT(t)
	objs, certs := mustRender(t, testOptions)
	crds, err := CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	plurals := map[string]bool{}
	for _, u := range crds {
		p, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
		plurals[p] = true
	}
	var clientConfigs []admissionregistrationv1.WebhookClientConfig
	mutating := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, find(t, objs, "MutatingWebhookConfiguration", "chaos-x-mutation"))
	g.Expect(mutating.Webhooks).To(HaveLen(len(webhooks)))
	for i, w := range mutating.Webhooks {
		g.Expect(w.Name).To(Equal("m" + webhooks[i].Kind + ".kb.io"))
		g.Expect(*w.ClientConfig.Service.Path).To(Equal("/mutate-chaos-mesh-org-v1alpha1-" + webhooks[i].Kind))
		g.Expect(plurals).To(HaveKey(w.Rules[0].Resources[0]))
		g.Expect(*w.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		clientConfigs = append(clientConfigs, w.ClientConfig)
	}
	validating := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "chaos-x-validation"))
	g.Expect(validating.Webhooks).To(HaveLen(len(webhooks)))
	for i, w := range validating.Webhooks {
		g.Expect(w.Name).To(Equal("v" + webhooks[i].Kind + ".kb.io"))
		g.Expect(*w.ClientConfig.Service.Path).To(Equal("/validate-chaos-mesh-org-v1alpha1-" + webhooks[i].Kind))
		g.Expect(plurals).To(HaveKey(w.Rules[0].Resources[0]))
		clientConfigs = append(clientConfigs, w.ClientConfig)
	}
	auth := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "chaos-x-validation-auth"))
	g.Expect(auth.Webhooks).To(HaveLen(1))
	g.Expect(*auth.Webhooks[0].ClientConfig.Service.Path).To(Equal("/validate-auth"))
	clientConfigs = append(clientConfigs, auth.Webhooks[0].ClientConfig)
	for _, cc := range clientConfigs {
		g.Expect(cc.CABundle).To(Equal(certs.CA))
		g.Expect(cc.Service.Name).To(Equal(ControllerService))
		g.Expect(cc.Service.Namespace).To(Equal("chaos-x"))
	}
	g.Expect(base64.StdEncoding.EncodeToString(certs.CA)).To(Equal(newValues(testOptions, certs).CABundle))
}

func TestEveryManifestIsRendered(t *testing.T) {
	files, err := fs.Glob(manifests, "manifests/*")
	if err != nil {
		t.Fatal(err)
	}
	listed := append(slices.Clone(manifestsBeforeSecrets), manifestsAfterSecrets...)
	for _, f := range files {
		if !slices.Contains(listed, path.Base(f)) {
			t.Errorf("%s is embedded but never rendered", f)
		}
	}
}

func TestCRDs(t *testing.T) {
	g := NewWithT(t)
	objs, err := CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(23))
	for _, u := range objs {
		crd := convert[apiextensionsv1.CustomResourceDefinition](t, u)
		g.Expect(crd.Spec.Group).To(Equal("chaos-mesh.org"))
		g.Expect(crd.Name).To(Equal(crd.Spec.Names.Plural + ".chaos-mesh.org"))
	}
	// These CRDs come from the api module the images were built against:
	// the chart's older NetworkChaos lacks partitionBehavior, which the
	// webhook defaults, and every NetworkChaos then sticks on "Cannot
	// update chaos spec".
	nc := convert[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition", "networkchaos.chaos-mesh.org"))
	g.Expect(nc.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties).To(HaveKey("partitionBehavior"))
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		in      Options
		want    Options
		wantErr string
	}{
		{name: "defaults", in: Options{}, want: Options{
			Namespace: "chaos-mesh", ControllerImage: DefaultControllerImage, DaemonImage: DefaultDaemonImage,
			PauseImage: "registry.k8s.io/pause:3.10.1", RuntimeSocket: "/run/containerd/containerd.sock", Timeout: 5 * time.Minute,
		}},
		{name: "kept", in: testOptions, want: func() Options { o := testOptions; o.Timeout = DefaultTimeout; return o }()},
		{name: "relative socket", in: Options{RuntimeSocket: "containerd.sock"}, wantErr: "absolute host path"},
		{name: "root socket", in: Options{RuntimeSocket: "/"}, wantErr: "absolute host path"},
		{name: "template injection", in: Options{ControllerImage: "x}}{{"}, wantErr: "no spaces, quotes or braces"},
		{name: "quote", in: Options{PauseImage: `a"b`}, wantErr: "no spaces, quotes or braces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tt.in.withDefaults()
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Log).NotTo(BeNil())
			got.Log = nil
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestUninstallRender: Uninstall renders with empty certificates, only for
// names and kinds.
func TestUninstallRender(t *testing.T) {
	g := NewWithT(t)
	o, err := Options{}.withDefaults()
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := render(o, &certificates{})
	g.Expect(err).NotTo(HaveOccurred())
	full, _ := mustRender(t, Options{})
	var a, b []string
	for _, u := range objs {
		a = append(a, objectKey(u))
	}
	for _, u := range full {
		b = append(b, objectKey(u))
	}
	g.Expect(a).To(Equal(b))
}
