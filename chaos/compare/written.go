package compare

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/framework/endstate"
)

// Written is what an operator writes to a child, to tell whether it went
// on writing once converged: desired's fields (labels, annotations, owners,
// spec, data), but a Secret's values too, which within one run change only
// when rewritten. A child's status and its resourceVersion are left out:
// Kubernetes' own controllers write those (a StatefulSet's ready count as
// its pods restart), not the operator.
func Written(u *unstructured.Unstructured) map[string]any {
	out := desired(u)
	if u.GetKind() == "Secret" {
		if data, ok, _ := unstructured.NestedMap(u.Object, "data"); ok {
			out["data"] = data
		}
	}
	return out
}

// Changed lists, sorted, the paths (as endstate writes them) whose
// values differ between two Written forms of one object.
func Changed(before, after map[string]any) []string {
	var out []string
	for _, d := range endstate.Values("", before, after) {
		out = append(out, d.Path)
	}
	slices.Sort(out)
	return out
}

// FirstFew is the first n of list, then how many more there are.
func FirstFew(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(slices.Clone(list[:n]), fmt.Sprintf("%d more", len(list)-n))
}
