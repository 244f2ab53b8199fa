package podstate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Guard watches the pods of a namespace while something waits for them to
// be ready, and ends the wait with a StuckError once a problem has lasted
// (Watcher). Call Check from each poll of the wait.
type Guard struct {
	Client    kubernetes.Interface
	Namespace string
	// Selector picks the pods (every pod of the namespace when empty);
	// admission refusals count for the whole namespace, since a refused
	// pod has no labels to select.
	Selector map[string]string
	// What names the pods in the error ("the operator's pods").
	What string
	// ImagesOnly watches for images that cannot be pulled and nothing
	// else: after a fault, the other problems (a crash loop, a volume
	// not yet mounted) may be the fault's doing and pass, an image that
	// is not there does not.
	ImagesOnly bool
	watcher    Watcher
}

// Check looks once. It returns a *StuckError, with the evidence gathered,
// when a problem has lasted, and nil otherwise, also when the pods cannot
// be listed (the wait's own timeout then reports what it saw).
func (g *Guard) Check(ctx context.Context) error {
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(g.Selector).String()}
	pods, err := g.Client.CoreV1().Pods(g.Namespace).List(ctx, opts)
	if err != nil {
		return nil
	}
	// A pull failure shows in the pods' states; the events tell only of
	// mounts and admission, which an images-only guard leaves alone.
	events := &corev1.EventList{}
	if !g.ImagesOnly {
		if listed, err := g.Client.CoreV1().Events(g.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
			events = listed
		}
	}
	stuck := g.watcher.Stuck(pods.Items, events.Items)
	if g.ImagesOnly {
		stuck = slices.DeleteFunc(stuck, func(l Lasting) bool { return !pullReasons[l.Reason] })
	}
	if len(stuck) == 0 {
		return nil
	}
	return &StuckError{What: g.What, Problems: stuck, Evidence: Evidence(ctx, g.Client, stuck)}
}

// StuckError says which pods will not become ready by waiting, and why.
type StuckError struct {
	What     string
	Problems []Lasting
	// Evidence is Evidence's account of each problem.
	Evidence string
}

func (e *StuckError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.String()
	}
	return fmt.Sprintf("%s will not become ready by waiting:\n%s", e.What, strings.Join(lines, "\n"))
}

// pullReasons are the kubelet's reasons for an image it cannot get.
var pullReasons = map[string]bool{"ImagePullBackOff": true, "ErrImagePull": true, "ErrImageNeverPull": true, "InvalidImageName": true}

// Unpullable is the first problem of an image the node cannot get, as
// "<image>: <reason>: <message>", or "".
func (e *StuckError) Unpullable() string {
	for _, p := range e.Problems {
		if pullReasons[p.Reason] {
			return fmt.Sprintf("%s: %s: %s", p.Image, p.Reason, oneLine(p.Message))
		}
	}
	return ""
}

// NoRoom is the scheduler's message for the first pod that no node had the
// resources for ("0/1 nodes are available: 1 Insufficient cpu."), or "".
// Unlike the other problems it may be someone else's doing: pods of other
// work on the cluster hold what this one asks for, and once they are gone
// the pod fits.
func (e *StuckError) NoRoom() string {
	for _, p := range e.Problems {
		if p.Reason == corev1.PodReasonUnschedulable && strings.Contains(p.Message, insufficient) {
			return p.Message
		}
	}
	return ""
}

// insufficient starts the scheduler's NodeResourcesFit reason for a node
// short of a resource the pod requests ("Insufficient cpu", "Insufficient
// memory", "Insufficient example.com/gpu").
const insufficient = "Insufficient "
