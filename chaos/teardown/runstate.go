package teardown

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// runState says whether an object that runs to completion has finished,
// and in what state it is: a batch Job has when its Complete or Failed
// condition is True, a Pod that is not restarted when it has Succeeded or
// Failed. Any other object does not run to completion and counts as
// finished.
func runState(u *unstructured.Unstructured) (state string, done bool) {
	switch u.GroupVersionKind().GroupKind().String() {
	case "Job.batch":
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if (m["type"] == "Complete" || m["type"] == "Failed") && m["status"] == "True" {
				return fmt.Sprint(m["type"]), true
			}
		}
		if _, started, _ := unstructured.NestedString(u.Object, "status", "startTime"); !started {
			return "not started", false
		}
		active, _, _ := unstructured.NestedInt64(u.Object, "status", "active")
		succeeded, _, _ := unstructured.NestedInt64(u.Object, "status", "succeeded")
		return fmt.Sprintf("running: %d active, %d succeeded", active, succeeded), false
	case "Pod":
		if policy, _, _ := unstructured.NestedString(u.Object, "spec", "restartPolicy"); policy == "Always" || policy == "" {
			return "serving", true
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return "phase " + phase, phase == "Succeeded" || phase == "Failed"
	}
	return "", true
}
