package report

import (
	"reflect"
	"strings"
	"testing"
)

// The ZooKeeper campaign's findings, as found: 17 of one oracle in a few
// places.
func TestGroupFindings(t *testing.T) {
	diff, cons := "differential: end state equals a fresh resource's with the same spec", "consistency: StatefulSet/zk spec.x"
	findings := []Finding{
		{Scenario: "explore-9", Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0.spec.resources.limits", Shrunk: []string{"spec.persistence.spec.resources.limits={}"}},
		{Scenario: "explore-12", Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", Shrunk: []string{"spec.persistence.spec.dataSource.name=explore"}},
		{Scenario: "explore-16", Oracle: diff, Where: "ConfigMap/zk-configmap.data.zoo.cfg", Shrunk: []string{"spec.config.minSessionTimeout=10"}},
		{Scenario: "explore-19", Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", Shrunk: []string{"spec.ports=[{\"containerPort\":0}]"}},
		{Scenario: "explore-27", Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0.spec.resources.requests.cpu", Shrunk: []string{"spec.persistence.spec.resources.requests={}"}},
		{Scenario: "explore-29", Oracle: diff, Where: "StatefulSet/zk.spec.volumeClaimTemplates[0].metadata.annotations"},
		{Scenario: "explore-36", Oracle: diff, Where: "ConfigMap/zk-configmap.data.zoo.cfg", Shrunk: []string{"spec.config.autoPurgePurgeInterval=5"}},
		{Scenario: "explore-50", Oracle: cons, Shrunk: []string{"spec.probes.livenessProbe.failureThreshold=0 (in a new spec.probes)"}},
		{Scenario: "explore-0", Oracle: "settles"},
	}
	want := []Cause{
		{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0.spec.resources", Findings: []string{"explore-9", "explore-27"}},
		{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", Findings: []string{"explore-12", "explore-19"}},
		{Oracle: diff, Where: "ConfigMap/zk-configmap.data.zoo", Findings: []string{"explore-16", "explore-36"}},
		{Oracle: diff, Where: "StatefulSet/zk.spec.volumeClaimTemplates[]", Findings: []string{"explore-29"}},
		{Oracle: cons, Where: "spec.probes", Findings: []string{"explore-50"}},
		{Oracle: "settles", Where: "the starting resource", Findings: []string{"explore-0"}},
	}
	if got := GroupFindings(findings); !reflect.DeepEqual(got, want) {
		t.Errorf("causes\n%+v\nwant\n%+v", got, want)
	}
	if got := GroupFindings(nil); got != nil {
		t.Errorf("causes of no findings: %+v", got)
	}
}

// A finding replays where its campaign ran: envtest, or a cluster.
func TestSummaryReplaysWhereTheCampaignRan(t *testing.T) {
	x := &Campaign{Findings: []Finding{{Scenario: "explore-7", Oracle: "runs", File: "f/explore-7.yaml"}}}
	if got := x.Summary("op.yaml", false); !strings.Contains(got, "replay: gauntlet run --envtest -f op.yaml -f f/explore-7.yaml") {
		t.Errorf("an envtest campaign's replay line is missing:\n%s", got)
	}
	x.OnCluster = true
	if got := x.Summary("op.yaml", false); !strings.Contains(got, "replay: gauntlet run -f op.yaml -f f/explore-7.yaml") {
		t.Errorf("a cluster campaign's replay line is missing:\n%s", got)
	}
	x.Set = []string{"OPERATOR_SOURCE=/src/zk", "NOTE=two words"}
	if got := x.Summary("op.yaml", false); !strings.Contains(got, "-f f/explore-7.yaml --set OPERATOR_SOURCE=/src/zk --set 'NOTE=two words'\n") {
		t.Errorf("the replay line lacks the campaign's variables:\n%s", got)
	}
}

// A run that breaks an oracle is a finding's cause again when the oracle
// and the place agree, and its fault is the finding's or the finding
// needed none.
func TestSameCause(t *testing.T) {
	diff, errs := "differential: end state equals a fresh resource's with the same spec", "operator: reconcile errors once converged"
	pvc := Finding{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", Shrunk: []string{"spec.pod.securityContext.seccompProfile.type=RuntimeDefault"}}
	loop := Finding{Oracle: errs, Shrunk: []string{"spec.redisLeader.readinessProbe.successThreshold=3 (in a new spec.redisLeader)"}}
	stale := Finding{Oracle: "twin", Where: "StatefulSet/zk.spec.template", FaultAction: "stale-view"}
	crash := Finding{Oracle: "operator: operator restarts", Where: "panic in redis-operator/k8sutils.enableRedisMonitoring",
		Shrunk: []string{"spec.kubernetesConfig.resources unset"}}
	for _, tc := range []struct {
		name string
		f    Finding
		run  Finding
		want bool
	}{
		{"same oracle and object, other fields", pvc, Finding{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", Shrunk: []string{"spec.pod.x=1"}}, true},
		{"same object, deeper path", pvc, Finding{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0.spec.resources"}, false},
		{"another oracle", pvc, Finding{Oracle: "settles", Where: "PersistentVolumeClaim/data-zk-0"}, false},
		{"a place against none", pvc, Finding{Oracle: diff, Shrunk: []string{"spec.pod.x=1"}}, false},
		{"no place, a step in the same family", loop, Finding{Oracle: errs, Shrunk: []string{"spec.size=2", "spec.redisLeader.livenessProbe.periodSeconds=5"}}, true},
		{"no place, no step in the family", loop, Finding{Oracle: errs, Shrunk: []string{"spec.redisFollower.replicas=2"}}, false},
		{"the finding's fault", stale, Finding{Oracle: "twin", Where: "StatefulSet/zk.spec.template.spec", FaultAction: "stale-view"}, true},
		{"another fault", stale, Finding{Oracle: "twin", Where: "StatefulSet/zk.spec.template", FaultAction: "pod-kill"}, false},
		{"no fault where the finding needs one", stale, Finding{Oracle: "twin", Where: "StatefulSet/zk.spec.template"}, false},
		{"a panic in the same function", crash, Finding{Oracle: crash.Oracle, Where: crash.Where, Shrunk: []string{"spec.redisExporter.resources unset"}}, true},
		{"a panic in another function, same family", crash, Finding{Oracle: crash.Oracle, Where: "panic in redis-operator/k8sutils.getEnvironmentVariables",
			Shrunk: []string{"spec.kubernetesConfig.redisSecret.name=x"}}, false},
		{"a fault where the finding needs none", pvc, Finding{Oracle: diff, Where: "PersistentVolumeClaim/data-zk-0", FaultAction: "pod-kill"}, true},
	} {
		if got := SameCause(tc.f, tc.run); got != tc.want {
			t.Errorf("%s: SameCause = %v, want %v", tc.name, got, tc.want)
		}
	}
}
