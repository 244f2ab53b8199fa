package preflight

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// resourceSchema is one served version of a CRD's schema, as the API
// server reads it.
type resourceSchema struct {
	structural *structuralschema.Structural
}

func newResourceSchema(crd string, v *apiextensionsv1.CustomResourceDefinitionVersion) (*resourceSchema, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s version %s has no schema", crd, v.Name)
	}
	var internal apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &internal, nil); err != nil {
		return nil, fmt.Errorf("CRD %s version %s: %w", crd, v.Name, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("CRD %s version %s: not a structural schema: %w", crd, v.Name, err)
	}
	return &resourceSchema{structural: s}, nil
}

// unknownFields are the paths of obj's fields that the schema does not
// have, which the API server drops (prunes) on create.
func (s *resourceSchema) unknownFields(obj map[string]any) []string {
	c := runtime.DeepCopyJSON(obj)
	return pruning.PruneWithOptions(c, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
}

// checkCEL type-checks expr over the resource as self, as the API server
// compiles a CRD's own rules, with every field of the object's metadata
// the engine evaluates against (not only name and generateName): "" when
// it compiles to a bool, else why not.
func (s *resourceSchema) checkCEL(expr string) string {
	root := *s.structural
	root.Properties = make(map[string]structuralschema.Structural, len(s.structural.Properties)+1)
	for k, v := range s.structural.Properties {
		root.Properties[k] = v
	}
	// All three, or the API server's compiler puts back a metadata of
	// name and generateName only.
	root.Properties["metadata"] = objectMeta()
	root.Properties["apiVersion"] = structuralschema.Structural{Generic: structuralschema.Generic{Type: "string"}}
	root.Properties["kind"] = structuralschema.Structural{Generic: structuralschema.Generic{Type: "string"}}
	root.XValidations = apiextensionsv1.ValidationRules{{Rule: expr}}
	results, err := cel.Compile(&root, model.SchemaDeclType(&root, true), celconfig.PerCallLimit,
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.NewExpressionsEnvLoader())
	if err != nil {
		return err.Error()
	}
	if len(results) == 1 && results[0].Error != nil {
		return celIssues(results[0].Error.Detail)
	}
	return ""
}

// celIssues puts CEL's issues on one line: "1:39: undefined field
// 'sizee'" without the source lines and carets under each.
func celIssues(detail string) string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimPrefix(detail, "compilation failed: "), "\n") {
		if rest, ok := strings.CutPrefix(line, "ERROR: <input>:"); ok {
			out = append(out, "at "+rest)
		}
	}
	if len(out) == 0 {
		return detail
	}
	return strings.Join(out, "; ")
}

// objectMeta is the schema of the metadata the engine reads CEL against:
// the object as the API server returns it.
func objectMeta() structuralschema.Structural {
	typed := func(t string) structuralschema.Structural {
		return structuralschema.Structural{Generic: structuralschema.Generic{Type: t}}
	}
	str := typed("string")
	strMap := typed("object")
	strMap.AdditionalProperties = &structuralschema.StructuralOrBool{Structural: &str}
	strList := typed("array")
	strList.Items = &str
	owner := typed("object")
	owner.Properties = map[string]structuralschema.Structural{"apiVersion": str, "kind": str, "name": str, "uid": str,
		"controller": typed("boolean"), "blockOwnerDeletion": typed("boolean")}
	owners := typed("array")
	owners.Items = &owner
	meta := typed("object")
	meta.Properties = map[string]structuralschema.Structural{
		"name": str, "generateName": str, "namespace": str, "uid": str, "resourceVersion": str,
		"generation": typed("integer"), "creationTimestamp": str, "deletionTimestamp": str,
		"labels": strMap, "annotations": strMap, "finalizers": strList, "ownerReferences": owners,
	}
	return meta
}
