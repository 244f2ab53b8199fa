package engine

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// created is the end state of a resource created with image and
// replicas: a StatefulSet that carries both, and a label that happens to
// equal the image once.
func created(image string, replicas int64, label string) *compare.State {
	return &compare.State{
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
	var l followLearner
	l.observe(created("etcd:3.6", 3, "etcd:3.6"))
	g.Expect(l.follows([]string{"spec.image"})).To(BeEmpty(), "one creation is no proof")
	l.observe(created("etcd:3.7", 5, "db"))
	l.observe(nil)
	g.Expect(l.follows([]string{"spec.image", "spec.replicas", "spec.storage"})).To(Equal([]scenario.Follow{
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
	g.Expect(followMisses(follows, st)).To(Equal([]string{
		`spec.image="etcd:3.7", but StatefulSet/demo spec.template.spec.containers[0].image is "etcd:3.6"`,
		"",
		"-",
		"spec.replicas=3, but there is no Deployment/demo",
	}))
}

func TestSameValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sameValue(int64(3), float64(3))).To(BeTrue())
	g.Expect(sameValue("0.5", "500m")).To(BeTrue())
	g.Expect(sameValue("1Gi", "1G")).To(BeFalse())
	g.Expect(sameValue(true, "true")).To(BeTrue())
	g.Expect(sameValue("a", "b")).To(BeFalse())
}

// The consistency checks say how often each follow held, and the first
// moment it did not.
func TestFollowChecks(t *testing.T) {
	g := NewWithT(t)
	s := &scenario.Scenario{}
	s.Spec.Assertions.Follows = []scenario.Follow{{Field: "spec.image", Object: "StatefulSet/demo", Path: "spec.x"}, {Field: "spec.replicas", Object: "StatefulSet/demo", Path: "spec.replicas"}}
	r := &run{s: s, follows: []followSeen{{judged: 2, violation: "after during[1]: no"}, {judged: 3}}}
	checks := r.followChecks()
	g.Expect(checks).To(HaveLen(2))
	g.Expect(checks[0].Kind).To(Equal("consistency"))
	g.Expect(checks[0].Violation).To(Equal("after during[1]: no"))
	g.Expect(checks[1].OK()).To(BeTrue())
	g.Expect(checks[1].Value).To(Equal("held at 3 moments"))
}

// A map's keys are learned leaf by leaf, and a quantity written another
// way in the child still follows.
func TestFollowLearnerMapLeaves(t *testing.T) {
	g := NewWithT(t)
	withCPU := func(cpu, child string) *compare.State {
		return &compare.State{
			Spec: map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": cpu}}},
			Children: map[string]map[string]any{"StatefulSet/demo": {"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": child}}}}}}}}},
		}
	}
	var l followLearner
	l.observe(withCPU("0.5", "500m"))
	l.observe(withCPU("2", "2"))
	g.Expect(l.follows([]string{"spec.resources.limits"})).To(Equal([]scenario.Follow{{
		Field: "spec.resources.limits.cpu", Object: "StatefulSet/demo", Path: "spec.template.spec.containers[0].resources.limits.cpu"}}))
	g.Expect(l.follows([]string{"spec.resources.lim"})).To(BeEmpty(), "a prefix of a name is not a parent")
}
