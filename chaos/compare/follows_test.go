package compare

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// created is the end state of a resource created with image and
// replicas: a StatefulSet that carries both, and a label that happens to
// equal the image once.
func created(image string, replicas int64, label string) *State {
	return &State{
		Spec: map[string]any{"image": image, "replicas": replicas, "storage": "1Gi"},
		Children: map[string]map[string]any{
			"StatefulSet/demo": {
				"labels": map[string]any{"tier": label},
				"spec": map[string]any{
					"replicas": replicas,
					"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": image}}}},
					"volumeClaimTemplates": []any{map[string]any{"spec": map[string]any{"resources": map[string]any{
						"requests": map[string]any{"storage": "1024Mi"}}}}},
				},
			},
		},
	}
}

// A child field follows a spec field when two creations with different
// values showed it, and none contradicted it; one creation is no proof.
func TestFollowLearner(t *testing.T) {
	g := NewWithT(t)
	var l FollowLearner
	l.Observe(created("etcd:3.6", 3, "etcd:3.6"))
	g.Expect(l.Follows([]string{"spec.image"})).To(BeEmpty(), "one creation is no proof")
	l.Observe(created("etcd:3.7", 5, "db"))
	l.Observe(nil)
	g.Expect(l.Follows([]string{"spec.image", "spec.replicas", "spec.storage"})).To(Equal([]scenario.Follow{
		{Field: "spec.image", Object: "StatefulSet/demo", Path: "spec.template.spec.containers[0].image"},
		{Field: "spec.replicas", Object: "StatefulSet/demo", Path: "spec.replicas"},
	}), "the label matched once and then not; storage never changed value")
}

// A child that does not carry the spec's value is named with both
// values; a quantity written another way carries it; an unset field is
// not judged.
func TestFollowMisses(t *testing.T) {
	g := NewWithT(t)
	follows := []scenario.Follow{
		{Field: "spec.image", Object: "StatefulSet/demo", Path: "spec.template.spec.containers[0].image"},
		{Field: "spec.storage", Object: "StatefulSet/demo", Path: "spec.volumeClaimTemplates[0].spec.resources.requests.storage"},
		{Field: "spec.paused", Object: "StatefulSet/demo", Path: "spec.paused"},
		{Field: "spec.replicas", Object: "Deployment/demo", Path: "spec.replicas"},
	}
	st := created("etcd:3.6", 3, "")
	st.Spec["image"] = "etcd:3.7"
	g.Expect(FollowMisses(follows, st)).To(Equal([]string{
		`spec.image="etcd:3.7", but StatefulSet/demo spec.template.spec.containers[0].image is "etcd:3.6"`,
		"",
		"-",
		"spec.replicas=3, but there is no Deployment/demo",
	}))
}

func TestSameValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SameValue(int64(3), float64(3))).To(BeTrue())
	g.Expect(SameValue("0.5", "500m")).To(BeTrue())
	g.Expect(SameValue("1Gi", "1G")).To(BeFalse())
	g.Expect(SameValue(true, "true")).To(BeTrue())
	g.Expect(SameValue("a", "b")).To(BeFalse())
}

// A map's keys are learned leaf by leaf, and a quantity written another
// way in the child still follows.
func TestFollowLearnerMapLeaves(t *testing.T) {
	g := NewWithT(t)
	withCPU := func(cpu, child string) *State {
		return &State{
			Spec: map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": cpu}}},
			Children: map[string]map[string]any{"StatefulSet/demo": {"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": child}}}}}}}}},
		}
	}
	var l FollowLearner
	l.Observe(withCPU("0.5", "500m"))
	l.Observe(withCPU("2", "2"))
	g.Expect(l.Follows([]string{"spec.resources.limits"})).To(Equal([]scenario.Follow{{
		Field: "spec.resources.limits.cpu", Object: "StatefulSet/demo", Path: "spec.template.spec.containers[0].resources.limits.cpu"}}))
	g.Expect(l.Follows([]string{"spec.resources.lim"})).To(BeEmpty(), "a prefix of a name is not a parent")
}
