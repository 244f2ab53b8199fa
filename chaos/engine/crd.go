package engine

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ServedVersion is a version the CRD serves and its spec's schema.
type ServedVersion struct {
	Name string
	Spec *apiextensionsv1.JSONSchemaProps
}

// ServedVersions are the versions the CRD of obj's kind serves, obj's
// own first, each with its spec's structural schema. A CRD the cluster
// lacks, or whose version of obj has no schema, is an error that says so.
func (e *Engine) ServedVersions(ctx context.Context, obj *unstructured.Unstructured) ([]ServedVersion, error) {
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
		var out []ServedVersion
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			sv := ServedVersion{Name: v.Name}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				if spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]; ok {
					sv.Spec = &spec
				}
			}
			if v.Name == gvk.Version {
				if sv.Spec == nil {
					return nil, fmt.Errorf("CRD %s version %s has no spec in its schema to generate from", crd.Name, v.Name)
				}
				out = append([]ServedVersion{sv}, out...)
				continue
			}
			if sv.Spec != nil {
				out = append(out, sv)
			}
		}
		if len(out) == 0 || out[0].Name != gvk.Version {
			return nil, fmt.Errorf("CRD %s does not serve version %s", crd.Name, gvk.Version)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no CRD of the cluster defines %s (do the Operator file's manifests install it?)", gvk.GroupKind())
}
