package starter

import (
	"fmt"
	"strings"
)

// starterScenario is one starter scenario file.
type starterScenario struct {
	file, name, description string
	// body is the spec after the resource: roles, fault, during,
	// assertions.
	body string
}

// scenarios are the starter set: a pod kill of one of the resource's
// pods, a partition of one from the rest, the operator killed during a
// change, a view fault (conflicts on its status writes) and a base for
// gauntlet explore. Every pod role is owned: no label of the operator's is
// assumed.
func (f *Found) scenarios() []starterScenario {
	change := ""
	if f.IntField != "" {
		field := strings.TrimPrefix(f.IntField, "spec.")
		change = fmt.Sprintf("    - patch: {spec: {%s: %d}}          # %s %d -> %d\n    - converge: true\n", field, f.IntValue+1, f.IntField, f.IntValue, f.IntValue+1)
	}
	ownedRoles := "  roles:\n    owned: {owned: true}              # the pods the resource owns, through its children\n    victim: {from: owned, pick: one}\n"
	out := []starterScenario{
		{file: "01-pod-kill.yaml", name: "pod-kill", description: "one pod of the " + f.Kind + " is killed; the operator must bring the resource back",
			body: ownedRoles + "  fault:\n    action: pod-kill\n    target: victim\n  assertions:\n    operatorRestarts: 0\n"},
		{file: "02-partition.yaml", name: "partition", description: "one pod of the " + f.Kind + " is cut off from the others for 20 s (needs two pods or more)",
			body: ownedRoles + "    rest: {from: owned, exclude: [victim]}\n  fault:\n    action: partition\n    target: victim\n    peer: rest\n    hold: 20s\n  assertions:\n    operatorRestarts: 0\n"},
	}
	kill := "  roles:\n    operator: {operator: true}\n  fault:\n    action: pod-kill\n    target: operator\n"
	if change != "" {
		kill += "  during:\n" + change
	}
	out = append(out, starterScenario{file: "03-operator-kill-during-change.yaml", name: "operator-kill-during-change",
		description: "the operator's pod is killed as the " + f.Kind + " changes; its replacement must finish the change",
		body:        kill + "  assertions:\n    operatorRestarts: 1\n"})
	if f.Plural != "" {
		view := "  roles:\n    operator: {operator: true}\n  fault:\n    action: api-error\n    target: operator\n    status: 409\n" +
			fmt.Sprintf("    requests: {resource: %s, subresource: status, probability: 0.5}\n    hold: 20s\n", f.Plural)
		if change != "" {
			view += "  during:\n" + change
		}
		out = append(out, starterScenario{file: "04-status-conflicts.yaml", name: "status-conflicts",
			description: "half the operator's status writes of the " + f.Kind + " fail with a conflict; the end state must be its fault-free twin's",
			body:        view + "  assertions:\n    operatorRestarts: 0\n"})
	}
	out = append(out, starterScenario{file: "05-explore-base.yaml", name: "explore-base",
		description: "the starting " + f.Kind + " and no fault: the base of gauntlet explore --base explore-base",
		body:        "  roles:\n    operator: {operator: true}          # the role explore's view faults act on\n  fault:\n    action: none\n    hold: 10s\n  assertions:\n    operatorRestarts: 0\n"})
	return out
}

// readyType matches the condition types that say a resource is done
// (Available, Ready, ClusterAvailable, AllReplicasReady, PodsReady).
const readyType = "(Available|Ready)$"

// converged are the CEL expressions the resource converges by: its
// status observed the generation it has, when the schema has
// observedGeneration, and every condition whose type says it is done is
// True, one at least; a status, at least, where there are no conditions.
func (f *Found) converged() []string {
	var out []string
	if f.ObservedGeneration {
		out = append(out, "has(self.status) && has(self.status.observedGeneration) && self.status.observedGeneration == self.metadata.generation")
	}
	if f.Conditions {
		out = append(out, "has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type.matches('"+readyType+"')) && "+
			"self.status.conditions.all(c, !c.type.matches('"+readyType+"') || c.status == 'True')")
	}
	if len(out) == 0 {
		out = append(out, "has(self.status)")
	}
	return out
}

func (s starterScenario) render(f *Found, manifest string) string {
	return fmt.Sprintf(`# Written by gauntlet init; edit freely (docs/scenarios.md has every field).
apiVersion: gauntlet.dev/v1alpha1
kind: Scenario
metadata:
  name: %s
  description: %s
spec:
%s  resource:
    manifest: %s
    converged:
%s%s`, s.name, quote(s.description), variableLines(f.Variables), manifest, convergedLines(f.converged()), s.body)
}

func variableLines(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("  variables:                          # the sample's: --set NAME=VALUE when you run\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %s: \"\"\n", n)
	}
	return b.String()
}

func convergedLines(exprs []string) string {
	var b strings.Builder
	for _, e := range exprs {
		fmt.Fprintf(&b, "      - %s\n", quote(e))
	}
	return b.String()
}
