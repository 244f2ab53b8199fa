package preflight

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// builtin knows the kinds Kubernetes serves itself, CRDs included.
var builtin = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}()

// Unserved lists the kinds of the operator's rendered manifests that
// Kubernetes does not serve itself and no CRD among them defines, each as
// "group/version Kind (namespace/name, …)": the Prometheus operator's
// ServiceMonitor, say. A cluster made here (kind, envtest) serves none of
// them, so a run there would stop at setup; an existing cluster may.
// cert-manager's kinds are not listed: where cert-manager is not served,
// the run issues their certificates itself (cluster.StandInForCertManager).
func Unserved(set *scenario.Set, overrides map[string]string) ([]string, error) {
	op := set.Operator.Spec
	objs, err := render.Operator(set.OperatorFile, &op, render.Vars{Overrides: overrides, Defaults: op.Variables})
	if err != nil {
		return nil, err
	}
	defined := map[schema.GroupKind]bool{}
	for _, crd := range crdsOf(objs) {
		defined[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = true
	}
	byKind := map[string][]string{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if builtin.Recognizes(gvk) || defined[gvk.GroupKind()] || gvk.Group == cluster.CertManagerGroup {
			continue
		}
		key := gvk.GroupVersion().String() + " " + gvk.Kind
		byKind[key] = append(byKind[key], path.Join(u.GetNamespace(), u.GetName()))
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		out = append(out, fmt.Sprintf("%s (%s)", k, strings.Join(byKind[k], ", ")))
	}
	return out, nil
}
