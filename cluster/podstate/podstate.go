package podstate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// StuckAfter is how long a problem must last before it is stuck. It is
// longer than the kubelet's first crash back-off (10 s), so an operator
// that crashes once at start (its webhook certificate not yet mounted, its
// API not yet served) and then runs is never failed, and short enough that
// a setup that will not come up is reported within 30 s of its first sign.
const StuckAfter = 15 * time.Second

// waitingReasons are the kubelet's reasons for a waiting container that
// does not heal by waiting.
var waitingReasons = map[string]string{
	"CrashLoopBackOff":           "the container keeps crashing",
	"ImagePullBackOff":           "the image cannot be pulled",
	"ErrImagePull":               "the image cannot be pulled",
	"ErrImageNeverPull":          "the image is not on the node and its pull policy is Never",
	"InvalidImageName":           "the image name is not valid",
	"CreateContainerConfigError": "the container's configuration refers to something missing (a Secret, a ConfigMap, a key)",
	"CreateContainerError":       "the container cannot be created",
	"RunContainerError":          "the container cannot be started",
}

// eventReasons are the reasons of Warning events that keep a pod from
// starting: a volume that cannot be mounted or attached, admission
// refusing the pod a controller creates.
var eventReasons = map[string]string{
	"FailedMount":        "a volume cannot be mounted",
	"FailedAttachVolume": "a volume cannot be attached",
	"FailedCreate":       "admission refused the pod",
}

// Problem is what keeps a pod (or the pods a controller creates) from
// becoming ready.
type Problem struct {
	// Namespace and Pod name the pod; for a refused creation, Pod is the
	// controller's object (Kind/name).
	Namespace, Pod string
	// Container and Image name the container in trouble, when one is.
	Container, Image string
	// Reason is the kubelet's or the event's reason (CrashLoopBackOff,
	// ImagePullBackOff, Unschedulable, FailedMount, FailedCreate...).
	Reason string
	// Message is what the kubelet, the scheduler or admission said.
	Message string
	// Restarts is the container's restart count.
	Restarts int32
}

// Key identifies the problem across polls. The kubelet alternates some
// reasons for one cause (ErrImagePull and ImagePullBackOff, a crash and
// its back-off): they share a key, so that the time it lasts adds up.
func (p Problem) Key() string {
	reason := p.Reason
	if family, ok := families[reason]; ok {
		reason = family
	}
	return p.Namespace + "/" + p.Pod + "/" + p.Container + "/" + reason
}

// families group the reasons the kubelet alternates for one cause.
var families = map[string]string{
	"ErrImagePull":         "pull",
	"ImagePullBackOff":     "pull",
	"CrashLoopBackOff":     "crash",
	"RunContainerError":    "crash",
	"CreateContainerError": "crash",
}

// String is the problem in one line, with what it means.
func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s", p.Namespace, p.Pod)
	if p.Container != "" {
		fmt.Fprintf(&b, " container %s (image %s)", p.Container, p.Image)
	}
	fmt.Fprintf(&b, ": %s", p.Reason)
	if means := meaning(p.Reason); means != "" {
		fmt.Fprintf(&b, ", %s", means)
	}
	if p.Restarts > 0 {
		fmt.Fprintf(&b, ", %d restarts", p.Restarts)
	}
	if p.Message != "" {
		fmt.Fprintf(&b, ": %s", oneLine(p.Message))
	}
	return b.String()
}

func meaning(reason string) string {
	if m, ok := waitingReasons[reason]; ok {
		return m
	}
	if m, ok := eventReasons[reason]; ok {
		return m
	}
	if reason == corev1.PodReasonUnschedulable {
		return "no node takes the pod"
	}
	return ""
}

// Of says what keeps one pod from becoming ready for good, or nil: a
// container waiting for a reason that does not heal by waiting, or the
// scheduler's refusal. A pod being deleted has none.
func Of(p *corev1.Pod) *Problem {
	if !p.DeletionTimestamp.IsZero() {
		return nil
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		if w := s.State.Waiting; w != nil {
			if _, stuck := waitingReasons[w.Reason]; stuck {
				return &Problem{Namespace: p.Namespace, Pod: p.Name, Container: s.Name, Image: imageOf(p, s),
					Reason: w.Reason, Message: w.Message, Restarts: s.RestartCount}
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &Problem{Namespace: p.Namespace, Pod: p.Name, Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}

// imageOf is the image the pod's spec gives the container (what the user
// wrote), else the one its status reports.
func imageOf(p *corev1.Pod, s corev1.ContainerStatus) string {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == s.Name {
			return c.Image
		}
	}
	return s.Image
}

// FromEvents are the problems Warning events show: a volume of a pod
// that cannot be mounted, a pod admission refused to create (a controller's
// FailedCreate naming "forbidden"). Only events of pods among live (by
// name) count for a pod, and only the newest event of each object and
// reason.
func FromEvents(events []corev1.Event, live []corev1.Pod) []Problem {
	names, mounting := map[string]bool{}, map[string]bool{}
	for _, p := range live {
		if p.DeletionTimestamp.IsZero() && Of(&p) == nil && !ready(&p) {
			names[p.Name] = true
			mounting[p.Name] = !started(&p)
		}
	}
	sorted := append([]corev1.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return eventTime(sorted[i]).After(eventTime(sorted[j])) })
	seen := map[string]bool{}
	var out []Problem
	for _, ev := range sorted {
		if ev.Type != corev1.EventTypeWarning {
			continue
		}
		if _, ok := eventReasons[ev.Reason]; !ok {
			continue
		}
		obj := ev.InvolvedObject
		switch {
		case ev.Reason == "FailedCreate" && !strings.Contains(ev.Message, "forbidden"):
			continue
		case ev.Reason != "FailedCreate" && (obj.Kind != "Pod" || !names[obj.Name]):
			continue
		case ev.Reason != "FailedCreate" && !mounting[obj.Name]:
			// A container has started since: the volumes mounted on a
			// retry, whatever keeps the pod unready now.
			continue
		case transientMount(ev.Message):
			continue
		}
		name := obj.Name
		if obj.Kind != "Pod" {
			name = obj.Kind + "/" + obj.Name
		}
		p := Problem{Namespace: ev.Namespace, Pod: name, Reason: ev.Reason, Message: ev.Message}
		if !seen[p.Key()] {
			seen[p.Key()] = true
			out = append(out, p)
		}
	}
	return out
}

// transientMount says whether a mount failure is the kubelet's own cache
// not yet synced ("failed to sync configmap cache: timed out waiting for
// the condition", the same for a Secret): the object exists, and a retry,
// on a back-off of up to two minutes, mounts it. A missing ConfigMap or
// Secret says "not found" instead.
func transientMount(message string) bool {
	return strings.Contains(message, "failed to sync ") && strings.Contains(message, " cache")
}

// started says whether a container of the pod, an init container's or
// not, has run: the kubelet starts none before every volume is mounted.
func started(p *corev1.Pod) bool {
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func eventTime(ev corev1.Event) time.Time {
	for _, t := range []time.Time{ev.EventTime.Time, ev.LastTimestamp.Time, ev.FirstTimestamp.Time, ev.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const most = 400
	if len(s) > most {
		s = s[:most] + "…"
	}
	return s
}
