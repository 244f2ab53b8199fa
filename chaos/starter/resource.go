package starter

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// variableUse is a ${NAME} of the scenario files.
var variableUse = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)

// imageVariable is an image field of the sample given by a variable
// (image: ${MEMCACHED_IMAGE}): the Operator file loads it into kind.
var imageVariable = regexp.MustCompile(`(?m)^\s*\w*[iI]mage:\s*"?\$\{([A-Z_][A-Z0-9_]*)\}"?\s*$`)

// literalImage is an image field of the sample given as it is.
var literalImage = regexp.MustCompile(`(?m)^\s*\w*[iI]mage:\s*"?([a-z0-9][^\s"$]*[:/][^\s"]+)"?\s*$`)

// scaleFields are the names an integer spec field that sizes a resource
// usually has, tried first for the change the operator is killed during.
var scaleFields = []string{"replicas", "size", "instances", "members", "nodes", "count"}

// resource reads the sample and its CRD.
func (f *Found) resource(path string, crd *unstructured.Unstructured) error {
	u, err := readOne(path)
	if err != nil {
		return err
	}
	u.SetNamespace("")
	u.SetResourceVersion("")
	u.SetUID("")
	delete(u.Object, "status")
	f.Resource = u
	f.Kind = u.GetKind()
	f.Plural, _, _ = unstructured.NestedString(crd.Object, "spec", "names", "plural")
	schema := schemaOf(crd, u.GroupVersionKind().Version)
	for _, dropped := range prune(u.Object, schema, "") {
		f.Notes = append(f.Notes, fmt.Sprintf("left %s out of the starting %s: its CRD's schema has no such field (the API server would drop it)", dropped, f.Kind))
	}
	_, f.Conditions, _ = unstructured.NestedMap(schema, "properties", "status", "properties", "conditions")
	_, f.ObservedGeneration, _ = unstructured.NestedMap(schema, "properties", "status", "properties", "observedGeneration")
	if !f.Conditions {
		f.Notes = append(f.Notes, fmt.Sprintf("the %s CRD's status has no conditions: converged is has(self.status), a weak test; write what your operator reports when it is done", f.Kind))
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("converged takes every condition of %s whose type ends in Available or Ready to be True (and one to exist); name the ones your operator sets", f.Kind))
	}
	raw, _ := os.ReadFile(path)
	for _, m := range variableUse.FindAllStringSubmatch(string(raw), -1) {
		if !slices.Contains(f.Variables, m[1]) {
			f.Variables = append(f.Variables, m[1])
			f.Notes = append(f.Notes, fmt.Sprintf("the sample uses ${%s}: every scenario gives it an empty default; --set %s=... when you run", m[1], m[1]))
		}
	}
	for _, m := range imageVariable.FindAllStringSubmatch(string(raw), -1) {
		if !slices.Contains(f.ImageVariables, m[1]) {
			f.ImageVariables = append(f.ImageVariables, m[1])
		}
	}
	for _, m := range literalImage.FindAllStringSubmatch(string(raw), -1) {
		f.Notes = append(f.Notes, fmt.Sprintf("the sample runs %s: a kind node pulls it where a registry answers; to load it from your Docker engine, add it to the Operator file's spec.images", m[1]))
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	ints := map[string]int64{}
	var names []string
	for k, v := range spec {
		if n, ok := wholeNumber(v); ok && n > 0 {
			ints[k] = n
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	if len(names) > 0 {
		f.IntField = "spec." + names[0]
		f.IntValue = ints[names[0]]
	} else {
		f.Notes = append(f.Notes, "the sample sets no integer spec field: the operator-kill scenario changes nothing during the kill; add a patch of a field your operator acts on")
	}
	return nil
}

// wholeNumber is v as an integer, when it is one (YAML read through JSON
// gives float64).
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

func rank(field string) int {
	if i := slices.Index(scaleFields, field); i >= 0 {
		return i
	}
	return len(scaleFields)
}

// schemaOf is the CRD's openAPIV3Schema at the version (or its first).
func schemaOf(crd *unstructured.Unstructured, version string) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for i, v := range versions {
		vm, _ := v.(map[string]any)
		if name, _ := vm["name"].(string); name == version || (version == "" && i == 0) {
			schema, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema")
			return schema
		}
	}
	return nil
}

// prune removes from obj the fields its schema does not have, as the API
// server would, and returns their paths. Metadata, a schema that keeps
// unknown fields, and a map of any keys are left alone.
func prune(obj map[string]any, schema map[string]any, path string) []string {
	if schema == nil {
		return nil
	}
	if keep, _ := schema["x-kubernetes-preserve-unknown-fields"].(bool); keep {
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		if additional, ok := schema["additionalProperties"].(map[string]any); ok {
			var out []string
			for k, v := range obj {
				if child, ok := v.(map[string]any); ok {
					out = append(out, prune(child, additional, path+"."+k)...)
				}
			}
			return out
		}
		return nil
	}
	var out []string
	for k, v := range obj {
		if path == "" && (k == "apiVersion" || k == "kind" || k == "metadata") {
			continue
		}
		sub, ok := props[k].(map[string]any)
		if !ok {
			delete(obj, k)
			out = append(out, strings.TrimPrefix(path+"."+k, "."))
			continue
		}
		switch child := v.(type) {
		case map[string]any:
			out = append(out, prune(child, sub, path+"."+k)...)
		case []any:
			items, _ := sub["items"].(map[string]any)
			for i, it := range child {
				if m, ok := it.(map[string]any); ok {
					out = append(out, prune(m, items, fmt.Sprintf("%s.%s[%d]", path, k, i))...)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
