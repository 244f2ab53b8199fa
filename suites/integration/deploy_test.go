package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// TestOperatorManifestsPassAdmissionWithoutWarnings renders the operator's
// kustomization (operator/config/default) and applies it to the API server:
// the namespace for real, everything else as a server-side dry run (a real
// webhook configuration would send this suite's requests to a webhook that
// does not run). Admission, PodSecurity included, runs on dry runs: the
// restricted namespace must admit the manager's pod template without a
// single warning. A non-compliant Deployment shows the check can fail.
func TestOperatorManifestsPassAdmissionWithoutWarnings(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	objs, err := cluster.RenderKustomization(framework.CRDPath("operator/config/default"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.SetImage(objs, "gauntlet.dev/operator", "gauntlet.dev/operator:integration")).To(Equal(1))

	var namespaces, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			namespaces = append(namespaces, o)
			continue
		case "CustomResourceDefinition":
			// The conversion webhook goes to the rendered Service. envtest
			// installed the CRD with its own local webhook URL, which an
			// apply of a Service reference would join, not replace: leave
			// conversion out of the dry run.
			svc, _, _ := unstructured.NestedStringMap(o.Object, "spec", "conversion", "webhook", "clientConfig", "service")
			g.Expect(svc).To(Equal(map[string]string{"name": "gauntlet-webhook-service", "namespace": "gauntlet-system", "path": "/convert"}))
			unstructured.RemoveNestedField(o.Object, "spec", "conversion")
		}
		rest = append(rest, o)
	}
	g.Expect(namespaces).To(HaveLen(1))
	g.Expect(namespaces[0].GetLabels()).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	d, err := cluster.Deploy(ctx, env.Config, namespaces, cluster.DeployOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Warnings).To(BeEmpty())

	d, err = cluster.Deploy(ctx, env.Config, rest, cluster.DeployOptions{DryRun: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Applied).To(ContainElements(
		"CustomResourceDefinition//databaseclusters.database.gauntlet.dev",
		"Deployment/gauntlet-system/gauntlet-controller-manager",
		"ValidatingWebhookConfiguration//gauntlet-validating-webhook-configuration",
	))
	g.Expect(d.Warnings).To(BeEmpty(), "the API server warned about the operator's manifests")

	// The same check on a pod template that breaks the restricted standard.
	var bad *unstructured.Unstructured
	for _, o := range rest {
		if o.GetKind() == "Deployment" {
			bad = o.DeepCopy()
		}
	}
	g.Expect(unstructured.SetNestedField(bad.Object, false, "spec", "template", "spec", "securityContext", "runAsNonRoot")).To(Succeed())
	d, err = cluster.Deploy(ctx, env.Config, []*unstructured.Unstructured{bad}, cluster.DeployOptions{DryRun: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Warnings).To(ContainElement(ContainSubstring("violate PodSecurity")))
}

// Objects of kinds the cluster does not serve (cert-manager's, with no
// cert-manager installed) stop the deployment before anything but the
// namespaces and CRDs is applied, every one of them named at once.
func TestDeployNamesEveryKindTheClusterDoesNotServe(t *testing.T) {
	g := NewWithT(t)
	obj := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	ns := newNamespace(t, "unserved")
	cm := obj("v1", "ConfigMap", ns, "settings")
	d, err := cluster.Deploy(t.Context(), env.Config, []*unstructured.Unstructured{
		cm,
		obj("cert-manager.io/v1", "Issuer", ns, "selfsigned-issuer"),
		obj("cert-manager.io/v1", "Certificate", ns, "serving-cert"),
	}, cluster.DeployOptions{})
	g.Expect(err).To(MatchError(And(
		ContainSubstring("the cluster serves no cert-manager.io/v1 Issuer ("+ns+"/selfsigned-issuer), cert-manager.io/v1 Certificate ("+ns+"/serving-cert)"),
		ContainSubstring("install what serves them first"))))
	g.Expect(d.Applied).To(Equal([]string{"Namespace//" + ns}), "nothing applied but the namespace the objects are in")
}
