package report

import (
	"testing"

	. "github.com/onsi/gomega"
)

// verdict is the first oracle a run broke, and what it saw.
func verdict(res *Result) (oracle, what string) { return Oracle(res, nil) }

// A run is judged by what it broke, not by how it ended: a refusal by the
// API server, a fault that never fired and a hung deletion judge nothing.
func TestVerdictOf(t *testing.T) {
	g := NewWithT(t)
	res := func(errs []string, checks ...Check) *Result {
		r := &Result{Run: &Run{Errors: errs}, Checks: checks}
		r.Violations = Violations(checks)
		return r
	}
	ok := Check{Kind: "stable", Name: "children keep still"}
	diff := Check{Kind: "differential", Name: "end state equals a fresh resource's with the same spec", Violation: "differs in 1 places"}

	oracle, _ := verdict(res(nil, ok))
	g.Expect(oracle).To(BeEmpty(), "passed")
	oracle, what := verdict(res([]string{"the action during the fault failed: during[0]: the API server refused during[0]'s patch: invalid"}))
	g.Expect(oracle).To(BeEmpty(), "a refusal is the schema at work")
	g.Expect(what).To(HavePrefix("refused"))
	oracle, _ = verdict(res([]string{"cleanup: waiting for X to be deleted: gave up"}, ok))
	g.Expect(oracle).To(BeEmpty(), "judged and passed; only its deletion hung")
	oracle, what = verdict(res(nil, ok, diff))
	g.Expect(oracle).To(Equal("differential: end state equals a fresh resource's with the same spec"))
	g.Expect(what).To(Equal("differs in 1 places"))
	oracle, _ = verdict(res([]string{"not converged after the heal: gave up"}))
	g.Expect(oracle).To(Equal("settles"))
	oracle, what = verdict(res([]string{"recovering from APIProxy/kill-after-write explore-4: the operator made fewer than 1 matching writes during the hold: " + KillNeverHappened}))
	g.Expect(oracle).To(BeEmpty(), "a fault that never fired judges nothing")
	g.Expect(what).To(HavePrefix("not judged"))
	pull := res([]string{"not converged after the heal: the pods of RedisFailover redisfailover will not become ready by waiting"})
	pull.Unpullable = "redis:6.2.6-alpine: ImagePullBackOff: Back-off pulling image"
	oracle, what = verdict(pull)
	g.Expect(oracle).To(BeEmpty(), "no operator makes an image exist")
	g.Expect(what).To(Equal("not judged, an image cannot be pulled: redis:6.2.6-alpine: ImagePullBackOff: Back-off pulling image"))
}

// A refusal names a field by its whole path, by its end from a parent on
// (a child object's own path), by a last name no common word could be,
// or by its section's name in prose.
func TestNames(t *testing.T) {
	for _, tc := range []struct {
		message, field string
		want           bool
	}{
		{"spec.replicas must be odd", "spec.replicas", true},
		{`Service "x" is invalid: spec.trafficDistribution: Unsupported value: ""`, "spec.override.service.spec.trafficDistribution", true},
		{"TLS is required when disableNonTLSListeners is set", "spec.tls.disableNonTLSListeners", true},
		{"TLS is required when xdisableNonTLSListeners is set", "spec.tls.disableNonTLSListeners", false},
		{"scale to 3 or more replicas", "spec.replicas", false},
		{"the image cannot be pulled", "spec.image", false},
		{"spec.storageClassName cannot change", "spec.persistence.storageClassName", true},
		{"shrinking persistent volumes is not supported", "spec.persistence.storage", true},
		{"persist the data first", "spec.persistence.storage", false},
		{"Could not find StatefulSet", "spec.override.statefulSet.spec.replicas", false},
		{"the image cannot be pulled", "spec.imagePullSecrets", false},
	} {
		if got := names(tc.message, tc.field); got != tc.want {
			t.Errorf("names(%q, %q) = %v, want %v", tc.message, tc.field, got, tc.want)
		}
	}
}

// Each oracle a run broke is placed where its check says it broke (the
// function the operator panicked in), else where the end state first
// differed: two panics in two functions are two causes, and a panic
// beside an end-state difference is placed at the panic.
func TestBrokenPlaces(t *testing.T) {
	g := NewWithT(t)
	crashed := &Result{Run: &Run{}, Checks: []Check{
		{Kind: "operator", Name: "operator restarts", Violation: "operator restarted 1 times", Where: "panic in op/k8sutils.getEnvironmentVariables"},
		{Kind: "operator", Name: "reconcile errors", Violation: "+3"},
	}}
	crashed.Violations = Violations(crashed.Checks)
	places := func(res *Result) []string {
		all, _ := brokenBy(res)
		var out []string
		for _, b := range all {
			out = append(out, b.Oracle+" @ "+b.Where)
		}
		return out
	}
	g.Expect(places(crashed)).To(Equal([]string{
		"operator: operator restarts @ panic in op/k8sutils.getEnvironmentVariables",
		"operator: reconcile errors @ "}))
	crashed.Twin = &TwinDiff{Differences: []Difference{{Path: "Service/db.spec.ports"}}}
	g.Expect(places(crashed)).To(Equal([]string{
		"operator: operator restarts @ panic in op/k8sutils.getEnvironmentVariables",
		"operator: reconcile errors @ Service/db.spec.ports"}), "a check that names no place is placed where the end state first differed")
	g.Expect(BrokenOracles(crashed, nil)).To(Equal([]string{"operator: operator restarts", "operator: reconcile errors"}))
	stalled := &Result{Run: &Run{Errors: []string{"not converged after the heal: gave up"}}}
	g.Expect(places(stalled)).To(Equal([]string{"settles @ "}))
}
