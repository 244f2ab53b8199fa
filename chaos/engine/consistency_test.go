package engine

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

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
