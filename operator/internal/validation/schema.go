package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/config/crd"
)

// Schema applies a CRD's own OpenAPI schema and CEL rules (the
// x-kubernetes-validations), as the API server does, to objects of one
// served version. The rules are written once, as markers on the API types;
// the controller applies them through Schema to objects that did not come
// through the API server's validation (a fake client, an older CRD), and
// the webhook to what it converts.
type Schema struct {
	version    string
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// NewSchema compiles the schema of version from a CRD manifest (YAML).
func NewSchema(crdYAML []byte, version string) (*Schema, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &def); err != nil {
		return nil, fmt.Errorf("reading the CRD: %w", err)
	}
	for _, v := range def.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s version %s has no schema", def.Name, version)
		}
		var internal apiextensions.CustomResourceValidation
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("CRD %s version %s: %w", def.Name, version, err)
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s: not a structural schema: %w", def.Name, version, err)
		}
		openAPI, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s: %w", def.Name, version, err)
		}
		return &Schema{
			version:    version,
			structural: structural,
			openAPI:    openAPI,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("CRD %s serves no version %s", def.Name, version)
}

// Validate defaults obj as the API server would, then checks it against
// the schema and its CEL rules; old, when not nil, is the stored object an
// update replaces (for transition rules). Paths are from the object's root
// (spec.replicas).
func (s *Schema) Validate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, err := s.content(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("converting the object: %w", err))}
	}
	var oldU map[string]any
	if old != nil {
		if oldU, err = s.content(old); err != nil {
			return field.ErrorList{field.InternalError(nil, fmt.Errorf("converting the stored object: %w", err))}
		}
	}
	var errs field.ErrorList
	if oldU == nil {
		errs = apiservervalidation.ValidateCustomResource(nil, u, s.openAPI)
	} else {
		// As the API server does on update: a value the stored object
		// already had is not refused for a rule added since (ratcheting).
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, u, oldU, s.openAPI)
	}
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, u, oldU, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// content is obj as the API server decodes it from JSON (whole numbers as
// int64), with nulls dropped where the schema does not allow them: a copy
// that defaulting may change.
func (s *Schema) content(obj runtime.Object) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(m, s.structural)
	structuraldefaulting.Default(m, s.structural)
	return m, nil
}

// ErrInvalidSpec marks a spec the operator cannot realise. Admission refuses
// such specs; the controller reports one that reached it all the same as a
// terminal error rather than retrying.
var ErrInvalidSpec = errors.New("invalid DatabaseCluster spec")

// Cluster returns every rule c breaks: the CRD's schema and CEL rules of
// the version c is stored in (transition rules aside), then Spec.
func Cluster(ctx context.Context, c *dbv1.DatabaseCluster) field.ErrorList {
	return Change(ctx, c, nil)
}

// Change returns every rule c breaks when it replaces old (nil on create),
// transition rules included: the rules of v1beta1 whatever version the
// object was written through, so that a write through v1alpha1 that
// carries v1beta1's fields is held to v1beta1's rules.
func Change(ctx context.Context, c, old *dbv1.DatabaseCluster) field.ErrorList {
	s, err := ClusterSchema(dbv1.GroupVersion.Version)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var stored runtime.Object // a nil *DatabaseCluster is not a nil Object
	if old != nil {
		stored = old
	}
	return append(s.Validate(ctx, c, stored), Spec(c)...)
}

// clusterSchemas compile each served version's schema on first use: the
// controller and the webhook only ever ask for v1beta1.
var clusterSchemas = map[string]func() (*Schema, error){
	"v1alpha1": sync.OnceValues(func() (*Schema, error) { return NewSchema(crd.DatabaseClusters, "v1alpha1") }),
	"v1beta1":  sync.OnceValues(func() (*Schema, error) { return NewSchema(crd.DatabaseClusters, "v1beta1") }),
}

// ClusterSchema is the schema of one served version (v1alpha1, v1beta1) of
// the DatabaseCluster CRD this operator ships (operator/config/crd).
func ClusterSchema(version string) (*Schema, error) {
	compile, ok := clusterSchemas[version]
	if !ok {
		return nil, fmt.Errorf("the DatabaseCluster CRD serves no version %q", version)
	}
	return compile()
}
