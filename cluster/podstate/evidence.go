package podstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LogLines is how many of a container's last log lines the evidence
// shows: enough for a stack trace's head or a fatal message and what led
// to it.
const LogLines = 20

// Evidence says, for each problem, what a person needs to see its cause:
// the pod's phase, conditions and containers' states (with the last
// termination's exit code), the container's image, the last LogLines lines
// of its log (the crashed container's, when it restarted) and the events
// of the pod or the refusing controller, oldest first. What cannot be read
// is said in place.
func Evidence(ctx context.Context, cs kubernetes.Interface, problems []Lasting) string {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "== %s", p.Problem)
		if p.For >= time.Second {
			fmt.Fprintf(&b, " (for %s)", p.For.Round(time.Second))
		}
		b.WriteString("\n")
		if !strings.Contains(p.Pod, "/") {
			pod, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Pod, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				b.WriteString("pod: gone\n")
			case err != nil:
				fmt.Fprintf(&b, "pod: could not be read: %v\n", err)
			default:
				writeState(&b, pod)
				if c := p.Container; c != "" {
					writeLog(ctx, &b, cs, pod, c, p.Restarts > 0)
				}
			}
		}
		writeEvents(ctx, &b, cs, p.Namespace, p.Pod)
	}
	return b.String()
}

// writeState writes the pod's phase, node, conditions and containers.
func writeState(b *strings.Builder, pod *corev1.Pod) {
	fmt.Fprintf(b, "pod: phase %s, node %q\n", pod.Status.Phase, pod.Spec.NodeName)
	for _, c := range pod.Status.Conditions {
		fmt.Fprintf(b, "  condition %s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			fmt.Fprintf(b, " %s: %s", c.Reason, oneLine(c.Message))
		}
		b.WriteString("\n")
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		fmt.Fprintf(b, "  container %s image %s ready=%v restarts=%d: %s", s.Name, imageOf(pod, s), s.Ready, s.RestartCount, stateOf(s.State))
		if t := s.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(b, "; last terminated: %s", stateOf(s.LastTerminationState))
		}
		b.WriteString("\n")
	}
}

func stateOf(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return strings.TrimSpace("waiting " + s.Waiting.Reason + " " + oneLine(s.Waiting.Message))
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.UTC().Format("15:04:05")
	case s.Terminated != nil:
		t := s.Terminated
		return strings.TrimSpace(fmt.Sprintf("terminated %s exit code %d %s", t.Reason, t.ExitCode, oneLine(t.Message)))
	}
	return "no state yet"
}

// writeLog writes the container's last log lines: the previous
// container's when it restarted (the one that crashed), else the current.
func writeLog(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, pod *corev1.Pod, container string, previous bool) {
	tail := int64(LogLines)
	which := "log"
	if previous {
		which = "log of the crashed container"
	}
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &tail}).Stream(ctx)
	if err != nil {
		fmt.Fprintf(b, "%s (last %d lines): none: %v\n", which, LogLines, err)
		return
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(b, "%s: reading it: %v\n", which, err)
	}
	text := strings.TrimRight(string(data), "\n")
	if text == "" {
		fmt.Fprintf(b, "%s (last %d lines): empty\n", which, LogLines)
		return
	}
	fmt.Fprintf(b, "%s (last %d lines):\n", which, LogLines)
	for _, line := range strings.Split(text, "\n") {
		fmt.Fprintf(b, "  | %s\n", line)
	}
}

// writeEvents writes the events of the object (a pod's name, or
// Kind/name), oldest first.
func writeEvents(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, namespace, object string) {
	kind, name, ok := strings.Cut(object, "/")
	if !ok {
		kind, name = "Pod", object
	}
	list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		fmt.Fprintf(b, "events: could not be listed: %v\n", err)
		return
	}
	var evs []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
			evs = append(evs, ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	fmt.Fprintf(b, "events of %s %s:\n", kind, name)
	if len(evs) == 0 {
		b.WriteString("  none\n")
	}
	for _, ev := range evs {
		count := ""
		if ev.Count > 1 {
			count = fmt.Sprintf(" (x%d)", ev.Count)
		}
		fmt.Fprintf(b, "  %s %s %s%s: %s\n", eventTime(ev).UTC().Format("15:04:05"), ev.Type, ev.Reason, count, oneLine(ev.Message))
	}
}
