package preflight

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// Check checks a set of files against what they name, before any
// cluster: the operator's rendered manifests (an image's replaces that no
// container runs; a namespace and selector that select no pod template)
// and the custom resource's CRD among them (a field of the resource's
// manifest or of a CEL expression that its schema does not have, CEL that
// does not give a bool). overrides are --set's. The error is a
// scenario.Errors, each mistake at its file, line and field. The files
// being right, it returns the manifests' kinds that only a cluster which
// serves them can run.
func Check(set *scenario.Set, overrides map[string]string) ([]Unserved, error) {
	op := set.Operator.Spec
	file := set.OperatorFile
	objs, err := render.Operator(file, &op, render.Vars{Overrides: overrides, Defaults: op.Variables})
	var unmatched render.Unmatched
	if errors.As(err, &unmatched) {
		var errs scenario.Errors
		for _, u := range unmatched {
			errs = append(errs, scenario.ErrorAt(file, fmt.Sprintf("spec.exclude[%d]", u.Index), "%s", u.Message))
		}
		return nil, errs
	}
	if err != nil {
		field := "spec.manifests"
		if op.Kustomize != "" {
			field = "spec.kustomize"
		}
		return nil, scenario.Errors{scenario.ErrorAt(file, field, "%v", err)}
	}
	var errs scenario.Errors
	images := containerImages(objs)
	for i, img := range op.Images {
		if img.Replaces == "" || slices.ContainsFunc(images, func(ref string) bool { return cluster.SameImage(ref, img.Replaces) }) {
			continue
		}
		errs = append(errs, scenario.ErrorAt(file, fmt.Sprintf("spec.images[%d].replaces", i),
			"%q (with any tag) is the image of no container in the operator's manifests; they run %s", img.Replaces, scenario.QuoteAll(images)))
	}
	errs = append(errs, selectorMistakes(file, &op, objs)...)
	crds := crdsOf(objs)
	for _, s := range set.Scenarios {
		errs = append(errs, schemaMistakes(set.Files[s.Metadata.Name], s, crds, overrides)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return unserved(objs), nil
}

// selectorMistakes says when no workload of the manifests runs, in the
// operator's namespace, pods that its selector selects.
func selectorMistakes(file string, op *scenario.OperatorSpec, objs []*unstructured.Unstructured) scenario.Errors {
	sel := labels.SelectorFromSet(op.Selector)
	var there []string
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != op.Namespace && ns != "" { // none: applied in op.Namespace
			continue
		}
		tmpl, found, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if !found {
			continue
		}
		if sel.Matches(labels.Set(tmpl)) {
			return nil
		}
		there = append(there, fmt.Sprintf("%s %s: %s", o.GetKind(), o.GetName(), labels.Set(tmpl)))
	}
	if len(there) == 0 {
		var namespaces []string
		for _, o := range objs {
			if _, found, _ := unstructured.NestedMap(o.Object, "spec", "template"); found && !slices.Contains(namespaces, o.GetNamespace()) {
				namespaces = append(namespaces, o.GetNamespace())
			}
		}
		return scenario.Errors{scenario.ErrorAt(file, "spec.namespace", "%q: no workload of the operator's manifests runs there (their pod templates are in %s)", op.Namespace, scenario.QuoteAll(namespaces))}
	}
	return scenario.Errors{scenario.ErrorAt(file, "spec.selector", "%s selects no pod template of the operator's manifests in %s (%s)", sel, op.Namespace, strings.Join(there, "; "))}
}

// crdsOf are the CustomResourceDefinitions among objs.
func crdsOf(objs []*unstructured.Unstructured) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || !strings.HasPrefix(o.GetAPIVersion(), apiextensionsv1.GroupName+"/") {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd) == nil {
			out = append(out, crd)
		}
	}
	return out
}

// schemaMistakes checks a scenario's resource manifest and its CEL against
// the schema of the CRD that serves it, when the operator's manifests hold
// that CRD (an operator may rely on one installed otherwise).
func schemaMistakes(file string, s *scenario.Scenario, crds []*apiextensionsv1.CustomResourceDefinition, overrides map[string]string) scenario.Errors {
	objs, err := render.Objects(scenario.Beside(filepath.Dir(file), s.Spec.Resource.Manifest), render.Vars{Overrides: overrides, Defaults: s.Spec.Variables})
	if err != nil || len(objs) != 1 {
		return nil // the file check reports an unreadable manifest
	}
	gvk := objs[0].GroupVersionKind()
	var crd *apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Spec.Group == gvk.Group && c.Spec.Names.Kind == gvk.Kind {
			crd = c
		}
	}
	if crd == nil {
		return nil
	}
	var version *apiextensionsv1.CustomResourceDefinitionVersion
	var served []string
	for i, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
		if v.Name == gvk.Version && v.Served {
			version = &crd.Spec.Versions[i]
		}
	}
	if version == nil {
		return scenario.Errors{scenario.ErrorAt(file, "spec.resource.manifest", "%s: CRD %s serves no version %s (it serves %s)",
			s.Spec.Resource.Manifest, crd.Name, gvk.Version, scenario.QuoteAll(served))}
	}
	sch, err := newResourceSchema(crd.Name, version)
	if err != nil {
		return scenario.Errors{scenario.ErrorAt(file, "spec.resource.manifest", "%v", err)}
	}
	var errs scenario.Errors
	for _, unknown := range sch.unknownFields(objs[0].Object) {
		errs = append(errs, scenario.ErrorAt(file, "spec.resource.manifest", "%s: field %s is not in the schema of %s %s (the API server would drop it)",
			s.Spec.Resource.Manifest, unknown, gvk.Kind, gvk.Version))
	}
	exprs := celOf(s)
	for _, path := range slices.Sorted(maps.Keys(exprs)) {
		if msg := sch.checkCEL(exprs[path]); msg != "" {
			errs = append(errs, scenario.ErrorAt(file, path, "%s, against the schema of %s %s (CRD %s)", msg, gvk.Kind, gvk.Version, crd.Name))
		}
	}
	return errs
}

// celOf is every CEL expression of a scenario over its resource, by path.
func celOf(s *scenario.Scenario) map[string]string {
	out := map[string]string{}
	for i, e := range s.Spec.Resource.Converged {
		out[fmt.Sprintf("spec.resource.converged[%d]", i)] = e
	}
	for i, c := range s.Spec.Assertions.Conditions {
		if c.CEL != "" {
			out[fmt.Sprintf("spec.assertions.conditions[%d].cel", i)] = c.CEL
		}
	}
	return out
}

func containerImages(objs []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range list {
				if m, ok := c.(map[string]any); ok {
					if img, ok := m["image"].(string); ok {
						seen[img] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
