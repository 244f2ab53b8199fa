package engine

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/envtesthost"
)

// The envtest host's garbage collector collects every kind the end-state
// comparison judges.
func TestCollectedKindsCoverChildResources(t *testing.T) {
	collected := map[schema.GroupResource]bool{}
	for _, l := range envtesthost.CollectedKinds() {
		gvk, err := apiutil.GVKForObject(l, clientgoscheme.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		collected[schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(kind) + "s"}] = true
	}
	for _, gvr := range compare.ChildResources {
		if !collected[gvr.GroupResource()] {
			t.Errorf("%s: the oracles judge it, the envtest garbage collector does not collect it", gvr.GroupResource())
		}
	}
}
