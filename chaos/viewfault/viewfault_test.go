package viewfault

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// A fault's rule keeps its match, defaults its namespace to the run's
// ("*" is every namespace), and carries the action's own settings.
func TestRule(t *testing.T) {
	run := Run{Namespace: "chaos-x-1", CreatedRV: "100", DeletedRV: "200"}
	d := func(v time.Duration) metav1.Duration { return metav1.Duration{Duration: v} }
	for _, tc := range []struct {
		name string
		f    scenario.Fault
		want apiproxy.Rule
	}{
		{"an error on status writes, in the run's namespace",
			scenario.Fault{Action: scenario.ActionAPIError, Status: 409, RetryAfter: d(time.Second),
				Requests: &scenario.RequestMatch{Verb: "update", Resource: "dbs", Subresource: "status", Count: 2, Probability: 0.5}},
			apiproxy.Rule{Verb: "update", Resource: "dbs", Subresource: "status", Namespace: "chaos-x-1", Count: 2, Probability: 0.5, Status: 409, RetryAfter: time.Second}},
		{"latency in every namespace",
			scenario.Fault{Action: scenario.ActionAPILatency, Latency: d(2 * time.Second), Requests: &scenario.RequestMatch{Namespace: "*"}},
			apiproxy.Rule{Delay: 2 * time.Second}},
		{"a reset in a named namespace, by name and labels",
			scenario.Fault{Action: scenario.ActionAPIReset, Requests: &scenario.RequestMatch{Namespace: "other", Name: "db", Labels: map[string]string{"a": "b"}}},
			apiproxy.Rule{Namespace: "other", Name: "db", Labels: map[string]string{"a": "b"}, Reset: true}},
		{"a time-out with no match", scenario.Fault{Action: scenario.ActionAPITimeout}, apiproxy.Rule{Namespace: "chaos-x-1", Timeout: true}},
		{"a kill after the second write",
			scenario.Fault{Action: scenario.ActionKillAfterWrite, After: 2, Requests: &scenario.RequestMatch{Verb: "patch", Resource: "statefulsets"}},
			apiproxy.Rule{Verb: "patch", Resource: "statefulsets", Namespace: "chaos-x-1", After: 2}},
		{"a view as of the creation",
			scenario.Fault{Action: scenario.ActionStaleView, StaleFrom: scenario.StaleFromCreated, Lag: d(3 * time.Second)},
			apiproxy.Rule{Namespace: "chaos-x-1", Stale: true, Lag: 3 * time.Second, AtResourceVersion: "100"}},
		{"a view as of the deletion",
			scenario.Fault{Action: scenario.ActionStaleView, StaleFrom: scenario.StaleFromDeleted},
			apiproxy.Rule{Namespace: "chaos-x-1", Stale: true, AtResourceVersion: "200"}},
		{"delayed events are a watch's",
			scenario.Fault{Action: scenario.ActionWatchDelay, Latency: d(time.Second), Requests: &scenario.RequestMatch{Verb: "get", Resource: "pods"}},
			apiproxy.Rule{Verb: "watch", Resource: "pods", Namespace: "chaos-x-1", Events: apiproxy.EventsDelay, Delay: time.Second}},
		{"dropped events", scenario.Fault{Action: scenario.ActionWatchDrop},
			apiproxy.Rule{Verb: "watch", Namespace: "chaos-x-1", Events: apiproxy.EventsDrop}},
		{"coalesced events", scenario.Fault{Action: scenario.ActionWatchCoalesce},
			apiproxy.Rule{Verb: "watch", Namespace: "chaos-x-1", Events: apiproxy.EventsCoalesce}},
		{"closed streams", scenario.Fault{Action: scenario.ActionWatchClose}, apiproxy.Rule{Verb: "watch", Namespace: "chaos-x-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Rule(tc.f, run)).To(Equal(tc.want))
		})
	}
}

// A view fault that needs the old object's deletion refuses to start
// without it, and a kill that never came fails the heal.
func TestExperimentRefusesWhatCannotHold(t *testing.T) {
	g := NewWithT(t)
	a := &Access{Target: func(context.Context) (chaosmesh.Pods, error) {
		return chaosmesh.Pods{Namespace: "op", Names: []string{"op-1"}}, nil
	}}
	_, err := Experiment(t.Context(), a, scenario.Fault{Action: scenario.ActionStaleView, StaleFrom: scenario.StaleFromDeleted}, Run{Name: "s"})
	g.Expect(err).To(MatchError(ContainSubstring("never saw the old object marked for deletion")))

	twin, err := Experiment(t.Context(), a, scenario.Fault{Action: scenario.ActionAPIError, Status: 500}, Run{Name: "s", Twin: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(twin.Harness.Kind).To(Equal("APIProxy/none (fault-free twin)"), "the twin leaves the proxy alone")
	g.Expect(twin.Harness.Inject(t.Context())).To(Succeed())

	k := &killAfter{}
	g.Expect(k.check(2)).To(MatchError(ContainSubstring(report.KillNeverHappened)))
	g.Expect(k.check(0)).To(Succeed(), "no write count asked for")
	a.Kill = func(context.Context) error { return errors.New("no operator pod to kill") }
	k.fire(a, Run{Name: "s", Logf: t.Logf}, apiproxy.Request{})
	g.Expect(k.check(2)).To(MatchError("no operator pod to kill"))
}

// With no window, or no proxy, a hold is whole.
func TestStillNeedsAWindowAndAProxy(t *testing.T) {
	var none *Access
	if none.Still(5*time.Second) != nil {
		t.Error("no proxy: the hold must be whole")
	}
	if (&Access{}).Still(0) != nil {
		t.Error("no window: the hold must be whole")
	}
}

// A rewired Deployment's containers reach the proxy with the pod's own
// token, the proxy's CA and the namespace where client-go reads them.
func TestRewire(t *testing.T) {
	g := NewWithT(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "op", "namespace": "op-system"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"volumes": []any{map[string]any{"name": "certs", "emptyDir": map[string]any{}}},
			"containers": []any{
				map[string]any{"name": "manager", "env": []any{map[string]any{"name": "A", "value": "1"}}},
				map[string]any{"name": "sidecar"},
			}}}}}}
	g.Expect(Rewire(u, "172.18.0.1:34567")).To(Succeed())
	spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	g.Expect(spec["automountServiceAccountToken"]).To(BeFalse(), "the kubelet's own mount would hide the projected one")
	volumes := spec["volumes"].([]any)
	g.Expect(volumes).To(HaveLen(2), "the pod's volumes kept")
	sources := volumes[1].(map[string]any)["projected"].(map[string]any)["sources"].([]any)
	g.Expect(sources).To(HaveLen(3))
	g.Expect(sources[0]).To(HaveKeyWithValue("serviceAccountToken", HaveKeyWithValue("path", "token")))
	g.Expect(sources[1]).To(HaveKeyWithValue("configMap", HaveKeyWithValue("name", CAConfigMap)))
	g.Expect(sources[2]).To(HaveKey("downwardAPI"))
	for i, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		env := c["env"].([]any)
		g.Expect(env[len(env)-2:]).To(Equal([]any{
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "172.18.0.1"},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": "34567"}}), "container %d", i)
		g.Expect(c["volumeMounts"]).To(Equal([]any{map[string]any{"name": "gauntlet-api-proxy", "mountPath": serviceAccountDir, "readOnly": true}}))
	}
	g.Expect(spec["containers"].([]any)[0].(map[string]any)["env"]).To(HaveLen(3), "the container's own variables kept")
	g.Expect(Rewire(u, "no-port")).To(HaveOccurred())

	ca := CA("op-system", []byte("PEM"))
	g.Expect(ca.GetName()).To(Equal(CAConfigMap))
	g.Expect(ca.GetNamespace()).To(Equal("op-system"))
	g.Expect(ca.Object["data"]).To(Equal(map[string]any{"ca.crt": "PEM"}))
}
