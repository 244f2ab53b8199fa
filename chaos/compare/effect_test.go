package compare

import (
	"maps"
	"testing"

	. "github.com/onsi/gomega"
)

// converged is a resource's state once converged: a StatefulSet whose
// container has resources and a pull policy, a PodDisruptionBudget, and
// the status the operator wrote for generation gen.
func converged(spec map[string]any, gen int64, cpu string) *State {
	return &State{
		Spec:   spec,
		Status: map[string]any{"observedGeneration": gen},
		Children: map[string]map[string]any{
			"StatefulSet/db": {"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"imagePullPolicy": "IfNotPresent",
				"resources":       map[string]any{"requests": map[string]any{"cpu": cpu}},
			}}}}}},
			"PodDisruptionBudget/db-leader": {"spec": map[string]any{"minAvailable": int64(1)}},
		},
	}
}

func with(spec map[string]any, key string, v any) map[string]any {
	out := maps.Clone(spec)
	out[key] = v
	return out
}

func TestUnshown(t *testing.T) {
	base := map[string]any{"replicas": int64(3), "kubernetesConfig": map[string]any{"image": "redis:7"}}
	requests := map[string]any{"requests": map[string]any{"memory": "64Mi"}}
	for _, tc := range []struct {
		name string
		spec map[string]any
		cpu  string // the child's cpu at the end (100m at the start)
		want []string
	}{
		{"a container type's field taken and ignored", with(base, "resources", requests), "100m", []string{"spec.resources.requests.memory"}},
		{"the same change, shown in a child", with(base, "resources", requests), "200m", nil},
		{"no change to the spec", base, "100m", nil},
		{"a field newly set to its zero value", with(base, "paused", false), "100m", nil},
		{"a name no child holds (the operator's own setting)", with(base, "reclaimPolicy", "Delete"), "100m", nil},
		{"a value a child already holds under that name", with(base, "imagePullPolicy", "IfNotPresent"), "100m", nil},
		{"a setting under a switch turned off", with(base, "followerBudget", map[string]any{"enabled": false, "minAvailable": int64(2)}), "100m", nil},
		{"a setting under a switch turned on", with(base, "followerBudget", map[string]any{"enabled": true, "minAvailable": int64(2)}), "100m", []string{"spec.followerBudget.enabled", "spec.followerBudget.minAvailable"}},
		{"a setting under a switch left unset", with(base, "followerBudget", map[string]any{"minAvailable": int64(2)}), "100m", nil},
		{"a feature turned on that shows nothing", with(base, "followerBudget", map[string]any{"enabled": true}), "100m", []string{"spec.followerBudget.enabled"}},
		{"a feature turned on that shows", with(base, "followerBudget", map[string]any{"enabled": true}), "200m", nil},
		{"a feature's switch under a switch that is off", with(base, "followerBudget", map[string]any{"enabled": false, "tls": map[string]any{"enabled": true}}), "100m", nil},
		{"a boolean not named as a feature's switch turned on", with(base, "paused", true), "100m", nil},
		{"a template's status", with(base, "claimTemplate", map[string]any{"status": map[string]any{"resources": requests}}), "100m", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end := converged(base, 1, "100m"), converged(tc.spec, 2, tc.cpu)
			NewWithT(t).Expect(Unshown(start, end, []string{"followerBudget.enabled", "paused"})).To(Equal(tc.want), "the status's observedGeneration moves with every change and shows nothing")
		})
	}
	NewWithT(t).Expect(Unshown(nil, converged(base, 1, "100m"), nil)).To(BeNil(), "no start read: nothing judged")
}
