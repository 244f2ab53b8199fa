package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// podSecurity is the Pod Security Standard level the scenario's namespace
// enforces: the scenario's, else the Operator file's, else restricted.
func (r *run) podSecurity() string {
	if l := r.s.Spec.PodSecurity; l != "" {
		return l
	}
	if l := r.e.operator.PodSecurity; l != "" {
		return l
	}
	return scenario.PodSecurityRestricted
}

// namespaceLabels enforce the scenario's Pod Security level, and warn at it.
func (r *run) namespaceLabels() map[string]string {
	l := r.podSecurity()
	return map[string]string{"pod-security.kubernetes.io/enforce": l, "pod-security.kubernetes.io/warn": l}
}

// admissionRefusal is the first object a controller could not create in
// the scenario's namespace because admission refused it (a Pod Security
// violation, a webhook's denial, a quota), as the controller reported it
// in a FailedCreate event; "" when there is none. Such a refusal does not
// heal by waiting: the scenario fails at once with its reason.
func (r *run) admissionRefusal(ctx context.Context) (string, error) {
	events := &corev1.EventList{}
	if err := r.e.Client.List(ctx, events, client.InNamespace(r.ns)); err != nil {
		return "", fmt.Errorf("listing the events of %s: %w", r.ns, err)
	}
	for _, ev := range events.Items {
		if ev.Reason != "FailedCreate" || !strings.Contains(ev.Message, "forbidden") {
			continue
		}
		hint := ""
		if strings.Contains(ev.Message, "PodSecurity") {
			hint = fmt.Sprintf(" (the namespace enforces Pod Security level %q; spec.podSecurity in the Scenario or Operator file sets another)", r.podSecurity())
		}
		return fmt.Sprintf("admission refused what %s %s creates: %s%s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message, hint), nil
	}
	return "", nil
}
