package engine

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/chaos/explore"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// servedVersion is a version the CRD serves and its spec's schema.
type servedVersion struct {
	name string
	spec *apiextensionsv1.JSONSchemaProps
}

// servedVersions are the versions the CRD of obj's kind serves, obj's
// own first, each with its spec's structural schema. A CRD the cluster
// lacks, or whose version of obj has no schema, is an error that says so.
func (e *Engine) servedVersions(ctx context.Context, obj *unstructured.Unstructured) ([]servedVersion, error) {
	gvk := obj.GroupVersionKind()
	list, err := e.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the CRDs: %w", err)
	}
	for _, u := range list.Items {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return nil, err
		}
		if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
			continue
		}
		var out []servedVersion
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			sv := servedVersion{name: v.Name}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				if spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]; ok {
					sv.spec = &spec
				}
			}
			if v.Name == gvk.Version {
				if sv.spec == nil {
					return nil, fmt.Errorf("CRD %s version %s has no spec in its schema to generate from", crd.Name, v.Name)
				}
				out = append([]servedVersion{sv}, out...)
				continue
			}
			if sv.spec != nil {
				out = append(out, sv)
			}
		}
		if len(out) == 0 || out[0].name != gvk.Version {
			return nil, fmt.Errorf("CRD %s does not serve version %s", crd.Name, gvk.Version)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no CRD of the cluster defines %s (do the Operator file's manifests install it?)", gvk.GroupKind())
}

// admitted dry-runs each step against the base resource, created in a
// namespace of its own for the purpose, and returns the steps the API
// server admits; it records in x those it refuses (with its answer),
// and, where another served version has the step's field, the steps one
// version admits and another refuses (a version skew: an object one
// version takes that the other cannot hold).
func (e *Engine) admitted(ctx context.Context, base *scenario.Scenario, obj *unstructured.Unstructured, steps []explore.Step, versions []servedVersion, x *report.Campaign) ([]explore.Step, error) {
	r := &run{e: e, s: base, vars: render.Vars{Overrides: e.o.Overrides, Defaults: base.Spec.Variables}}
	if err := r.create(ctx); err != nil {
		return nil, fmt.Errorf("the starting resource (%s), which the campaign's every step patches: %w", base.Spec.Resource.Manifest, err)
	}
	defer func() {
		// Gone before any run: a resource left behind would be reconciled
		// all campaign long, its state in every process of the operator.
		ctx := context.WithoutCancel(ctx)
		if err := r.deleteResource(ctx); err != nil {
			e.logf("explore: the resource the dry runs patched: %v", err)
		}
		_ = e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
	}()
	dryRun := func(version string, patch []byte) error {
		gvr := r.gvr
		gvr.Version = version
		_, err := e.Dynamic.Resource(gvr).Namespace(r.ns).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	createDryRun := func(st explore.Step) error {
		created, err := explore.WithSteps(obj, []explore.Step{st})
		if err != nil {
			return err
		}
		created.SetNamespace(r.ns)
		created.SetName(obj.GetName() + "-created")
		_, err = e.Dynamic.Resource(r.gvr).Namespace(r.ns).Create(ctx, created, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	var ok []explore.Step
	for _, st := range steps {
		patch, err := json.Marshal(st.Patch())
		if err != nil {
			return nil, err
		}
		err = dryRun(versions[0].name, patch)
		switch {
		case err == nil:
			ok = append(ok, st)
		case createDryRun(st) == nil:
			// Refused as a change, admitted at creation: a field its
			// rules keep as it was created.
			st.AtCreation = true
			ok = append(ok, st)
		default:
			x.Refused = append(x.Refused, fmt.Sprintf("%s: %v", st, err))
		}
		for _, v := range versions[1:] {
			if !explore.HasField(v.spec, st.Path[1:]) || (st.Leaf != nil && !explore.HasField(v.spec, st.Leaf[1:])) {
				continue
			}
			x.CrossVersion++
			other := dryRun(v.name, patch)
			if (err == nil) != (other == nil) {
				x.VersionSkews = append(x.VersionSkews, fmt.Sprintf("%s: %s through %s, %s through %s",
					st, verdictText(err), versions[0].name, verdictText(other), v.name))
			}
		}
	}
	return ok, nil
}

func verdictText(err error) string {
	if err == nil {
		return "admitted"
	}
	return "refused (" + err.Error() + ")"
}
