package preflight

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gauntlet-dev/gauntlet/cluster"
)

// builtin knows the kinds Kubernetes serves itself, CRDs included.
var builtin = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}()

// Unserved is a kind of the operator's rendered manifests that Kubernetes
// does not serve itself and no CRD among them defines (the Prometheus
// operator's ServiceMonitor, say), with every object of it. A cluster made
// here (kind, envtest) serves none of them, so a run there would stop at
// setup; an existing cluster may.
type Unserved struct {
	GroupVersion string
	Kind         string
	// Objects are namespace/name, or name for a cluster-scoped one.
	Objects []string
}

// String is "group/version Kind (namespace/name, …)".
func (u Unserved) String() string {
	return fmt.Sprintf("%s %s (%s)", u.GroupVersion, u.Kind, strings.Join(u.Objects, ", "))
}

// unserved lists the kinds of objs that are not served, sorted by
// group/version and kind. cert-manager's kinds are not listed: where
// cert-manager is not served, the run issues their certificates itself
// (cluster.StandInForCertManager).
func unserved(objs []*unstructured.Unstructured) []Unserved {
	defined := map[schema.GroupKind]bool{}
	for _, crd := range crdsOf(objs) {
		defined[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = true
	}
	byKind := map[schema.GroupVersionKind][]string{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if builtin.Recognizes(gvk) || defined[gvk.GroupKind()] || gvk.Group == cluster.CertManagerGroup {
			continue
		}
		byKind[gvk] = append(byKind[gvk], path.Join(u.GetNamespace(), u.GetName()))
	}
	out := make([]Unserved, 0, len(byKind))
	for gvk, objects := range byKind {
		out = append(out, Unserved{GroupVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Objects: objects})
	}
	slices.SortFunc(out, func(a, b Unserved) int {
		return cmp.Or(strings.Compare(a.GroupVersion, b.GroupVersion), strings.Compare(a.Kind, b.Kind))
	})
	return out
}
