package compare

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// TestCompareTwin: a difference is reported path by path, twin beside
// faulted; a child in one run only is missing or leaked; what also
// differs between two fault-free runs is ignored, whichever list index.
func TestCompareTwin(t *testing.T) {
	g := NewWithT(t)
	twin := &State{
		Status:   map[string]any{"readyReplicas": 5.0, "members": []any{map[string]any{"id": "a1", "name": "db-0"}}},
		Children: map[string]map[string]any{"StatefulSet/db": {"spec": map[string]any{"replicas": 5.0}}, "Service/db": {}},
		Writes:   20,
	}
	faulted := &State{
		Status:   map[string]any{"readyReplicas": 3.0, "members": []any{map[string]any{"id": "b2", "name": "db-0"}}},
		Children: map[string]map[string]any{"StatefulSet/db": {"spec": map[string]any{"replicas": 3.0}}, "PodDisruptionBudget/db": {}},
		Writes:   200,
	}
	noise := Noise{}
	g.Expect(noise.Learn(&State{Status: map[string]any{"members": []any{map[string]any{"id": "x", "name": "db-0"}, map[string]any{"id": "y"}}}},
		&State{Status: map[string]any{"members": []any{map[string]any{"id": "z", "name": "db-0"}, map[string]any{"id": "w"}}}})).To(Equal([]string{"status.members[*].id"}))

	checks, diff := Twin(twin, faulted, noise)
	var paths []string
	for _, d := range diff.Differences {
		paths = append(paths, d.Path+": "+d.Twin+" | "+d.Faulted)
	}
	g.Expect(paths).To(ConsistOf(
		"status.readyReplicas: 5 | 3",
		"Service/db: present | missing",
		"PodDisruptionBudget/db: absent | present (leaked)",
		"StatefulSet/db.spec.replicas: 5 | 3",
	))
	g.Expect(diff.Ignored).To(ConsistOf("status.members[0].id"))
	g.Expect(checks).To(HaveLen(3))
	g.Expect(checks[1].Violation).To(HavePrefix("the end state differs from the fault-free twin's in 4 places"))
	g.Expect(checks[2].Violation).To(Equal("the operator made 200 writes, against 20 in the fault-free twin"))
	g.Expect(checks[0].OK()).To(BeTrue(), "neither deleted anything")

	// Another member leads after the fault: the same cluster.
	led := func(leader int) *State {
		var members []any
		for i := range 3 {
			m := map[string]any{"name": fmt.Sprintf("db-%d", i)}
			if i == leader {
				m["leader"] = true
			}
			members = append(members, m)
		}
		return &State{Status: map[string]any{"members": members}}
	}
	checks, diff = Twin(led(1), led(0), nil)
	g.Expect(checks[1].Violation).To(BeEmpty())
	g.Expect(diff.Ignored).To(ConsistOf("status.members[0].leader (held by another item)", "status.members[1].leader (held by another item)"))
	noLeader := led(-1)
	checks, _ = Twin(led(1), noLeader, nil)
	g.Expect(checks[1].Violation).To(ContainSubstring("status.members[1].leader: true in the twin, absent after the fault"), "a leader lost is a finding")

	same, _ := Twin(twin, twin, nil)
	g.Expect(same[0].OK() && same[1].OK() && same[2].OK()).To(BeTrue(), "a run equals itself")
	g.Expect(strings.Contains(Show(map[string]any{"a": "<ns>"}), `\u003c`)).To(BeFalse(), "shown as written")
}

// Whether the volume binder got to a claim before the end state was read
// is not the operator's doing.
func TestOperatorAnnotations(t *testing.T) {
	g := NewWithT(t)
	g.Expect(operatorAnnotations(map[string]string{
		"pv.kubernetes.io/bind-completed": "yes", "volume.kubernetes.io/selected-node": "n1",
		"volume.beta.kubernetes.io/storage-provisioner": "rancher.io/local-path", "example.com/owner": "db",
	})).To(Equal(map[string]string{"example.com/owner": "db"}))
	g.Expect(operatorAnnotations(map[string]string{"pv.kubernetes.io/bound-by-controller": "yes"})).To(BeNil())
}

// A run that deletes an object its twin kept (or one of the same name
// once more) breaks the twin oracle even when its end state looks the
// same; a resource two fault-free runs delete differently never does.
func TestCompareDeletes(t *testing.T) {
	g := NewWithT(t)
	twin := &State{Deleted: map[string]int{"persistentvolumeclaims/data-db-0": 1}}
	recreated := &State{Deleted: map[string]int{"persistentvolumeclaims/data-db-0": 2, "statefulsets/db": 1}}
	checks, _ := Twin(twin, recreated, nil)
	g.Expect(checks[0].Name).To(Equal("operator deletes only what the twin deletes"))
	g.Expect(checks[0].Value).To(Equal("3 (twin 1)"))
	g.Expect(checks[0].Where).To(Equal("persistentvolumeclaims/data-db-0"))
	g.Expect(checks[0].Violation).To(Equal("the operator deleted what the fault-free twin did not: " +
		"persistentvolumeclaims/data-db-0 (2 times, once in the twin), statefulsets/db (once, never in the twin)"))
	checks, _ = Twin(recreated, twin, nil)
	g.Expect(checks[0].OK()).To(BeTrue(), "deleting less is the end state's business (a leak), not this check's")

	noise := Noise{}
	g.Expect(noise.Learn(&State{Deleted: map[string]int{"pods/db-0": 1}}, &State{})).To(Equal([]string{"deletes of pods"}))
	checks, _ = Twin(&State{}, &State{Deleted: map[string]int{"pods/db-1": 1, "statefulsets/db": 1}}, noise)
	g.Expect(checks[0].Violation).To(HaveSuffix(": statefulsets/db (once, never in the twin)"), "pods differ between equal runs")
}

// A list's items in another order are the same list: an item gone at one
// index and there at another is no finding; an item replaced is.
func TestWholeItemsMoved(t *testing.T) {
	g := NewWithT(t)
	amqp := `{"name":"amqp","port":5672}`
	kept, moved := unpermuted([]report.Difference{
		{Path: "Service/rmq.spec.ports[0]", Twin: amqp, Faulted: "absent"},
		{Path: "Service/rmq.spec.ports[2]", Twin: "absent", Faulted: amqp},
	})
	g.Expect(kept).To(BeEmpty())
	g.Expect(moved).To(HaveLen(2))
	kept, _ = unpermuted([]report.Difference{
		{Path: "Service/rmq.spec.ports[0]", Twin: amqp, Faulted: "absent"},
		{Path: "Service/rmq.spec.ports[2]", Twin: "absent", Faulted: `{"name":"amqp","port":5673}`},
	})
	g.Expect(kept).To(HaveLen(2), "another port is a difference")
}

// A stamp the operator writes when it restarts something holds another
// instant in every run: two instants are no finding, a stamp there in
// one run only is.
func TestUntimed(t *testing.T) {
	g := NewWithT(t)
	sts := func(annotations map[string]any) *State {
		return &State{Children: map[string]map[string]any{"StatefulSet/rmq": {"annotations": annotations}}}
	}
	twin := sts(map[string]any{"example.com/restartedAt": "2026-11-28T04:05:06Z", "example.com/version": "1"})
	later := sts(map[string]any{"example.com/restartedAt": "2026-11-28T04:07:41.123Z", "example.com/version": "1"})
	checks, diff := Twin(twin, later, nil)
	g.Expect(checks[1].OK()).To(BeTrue(), "%v", diff.Differences)
	g.Expect(diff.Ignored).To(ConsistOf("StatefulSet/rmq.annotations.example.com/restartedAt (another instant)"))

	unstamped := sts(map[string]any{"example.com/version": "1"})
	checks, _ = Twin(twin, unstamped, nil)
	g.Expect(checks[1].Violation).To(ContainSubstring("restartedAt"), "a stamp there in one run only is a difference")
	checks, _ = Twin(twin, sts(map[string]any{"example.com/restartedAt": "yesterday", "example.com/version": "1"}), nil)
	g.Expect(checks[1].OK()).To(BeFalse(), "not an instant: compared as it is")
}

// A child older than its resource was kept from a recreate's earlier
// object; whether the garbage collector removed an owned one (by the
// resource or by a child recreated with it) before the operator's first
// pass took it over is a race, not the operator's doing.
func TestPredates(t *testing.T) {
	g := NewWithT(t)
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 28, 5, min, 0, 0, time.UTC)) }
	resource := &unstructured.Unstructured{}
	resource.SetKind("RabbitmqCluster")
	resource.SetName("rmq")
	resource.SetCreationTimestamp(at(10))
	child := func(made int, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		c := &unstructured.Unstructured{}
		c.SetCreationTimestamp(at(made))
		c.SetOwnerReferences(owners)
		return c
	}
	owned := metav1.OwnerReference{Kind: "RabbitmqCluster", Name: "rmq", UID: "new"}
	g.Expect(predates(child(5), resource)).To(BeTrue(), "a claim kept from the earlier cluster")
	g.Expect(predates(child(5, metav1.OwnerReference{Kind: "StatefulSet", Name: "rmq-server"}), resource)).To(BeFalse(), "a claim the old StatefulSet owned: collected, or not yet")
	g.Expect(predates(child(5, owned), resource)).To(BeFalse(), "taken over before the collector got to it")
	g.Expect(predates(child(12), resource)).To(BeFalse(), "made for this resource")
}
