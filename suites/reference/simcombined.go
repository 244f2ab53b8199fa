package reference

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Operations the world can observe in flight when a member fails.
const (
	OpScaleUp     = "scale-up"
	OpScaleDown   = "scale-down"
	OpUpgrade     = "upgrade"
	OpReplacement = "replacement"
	// OpRefusedUpgrade is an image change on a cluster of one or two
	// members, which the operator must not roll.
	OpRefusedUpgrade = "refused upgrade"
)

// What the simulated world notes (sim.World.Note) when a healthy member
// fails, by a perturbation or by the armed failure: tests count these to
// show which combinations their seeds reached.
const (
	// NoteMemberFails: a healthy member failed (its process stopped
	// answering, its pod was deleted or became unready).
	NoteMemberFails = "a member fails"
	// NoteMidChangeFired: the armed failure found a change in flight and fired.
	NoteMidChangeFired = "the armed failure fires mid-change"
	// NoteTwoFail: the armed failure took two members at once.
	NoteTwoFail = "two members fail at once mid-change"
)

// NoteFailureDuring is noted when a healthy member fails while op is in
// flight; a scale in either direction also notes OpScale.
func NoteFailureDuring(op string) string { return "a member fails while in flight: " + op }

// OpScale stands for a scale in either direction in NoteFailureDuring.
const OpScale = "scale"

// NoteFailureOfSize is noted when a member of a cluster of n fails.
func NoteFailureOfSize(n int32) string {
	return fmt.Sprintf("a member of a %d-member cluster fails", n)
}

// maxSimOrdinal bounds the ordinals the simulation looks at (the spec allows 9).
const maxSimOrdinal = 9

// simMemberName is the pod name of an etcd member: its own once started,
// else the one its peer URL was registered for (a learner not yet started).
func simMemberName(c *dbv1.DatabaseCluster, m operator.EtcdMember) string {
	if m.Name != "" {
		return m.Name
	}
	for i := range maxSimOrdinal {
		name := operator.MemberName(c, i)
		if slices.Contains(m.PeerURLs, operator.PeerURL(c, name, operator.BuilderOptions{})) {
			return name
		}
	}
	return ""
}

func simOrdinal(c *dbv1.DatabaseCluster, name string) int {
	for i := range maxSimOrdinal {
		if operator.MemberName(c, i) == name {
			return i
		}
	}
	return -1
}

// inFlight lists the operations under way, as the world sees them: a scale
// while etcd's membership (members being replaced counted once) differs from
// spec.replicas or a learner is registered for it; an upgrade while a member
// pod runs an image other than spec.image; a replacement from a lost volume
// until a new, healthy voter holds the name.
func (sw *simWorld) inFlight(ctx context.Context) ([]string, error) {
	if sw.deleted {
		return nil, nil
	}
	members := sw.etcd.Members()
	if len(members) == 0 {
		return nil, nil // not bootstrapped: nothing to change yet
	}
	c, err := sw.cluster(ctx)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	desired := int(*sw.intent.Replicas)
	// A replacement ends when a new voter holds the name and is healthy.
	for name, old := range sw.replacing {
		if slices.ContainsFunc(members, func(m operator.EtcdMember) bool {
			return m.Name == name && m.ID != old && !m.IsLearner && m.Healthy
		}) {
			delete(sw.replacing, name)
		}
	}
	var ops []string
	voters, up, down := 0, false, false
	for _, m := range members {
		name := simMemberName(c, m)
		if _, replacing := sw.replacing[name]; replacing {
			continue
		}
		switch {
		case !m.IsLearner:
			voters++
		case simOrdinal(c, name) >= desired:
			down = true // a learner no longer wanted
		default:
			up = true
		}
	}
	size := voters + len(sw.replacing)
	if up || size < desired {
		ops = append(ops, OpScaleUp)
	}
	if down || size > desired {
		ops = append(ops, OpScaleDown)
	}
	pods, err := sw.pods(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() && len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image != c.Spec.Image {
			if operator.FaultTolerance(desired) == 0 {
				ops = append(ops, OpRefusedUpgrade)
			} else {
				ops = append(ops, OpUpgrade)
			}
			break
		}
	}
	if len(sw.replacing) > 0 {
		ops = append(ops, OpReplacement)
	}
	return ops, nil
}

// noteFailure records, before a failure is applied to the named member, what
// it combines with. Only a failure of a member etcd counts healthy is noted:
// failing one already down or gone changes nothing.
func (sw *simWorld) noteFailure(ctx context.Context, name string) error {
	if sw.deleted || !slices.ContainsFunc(sw.etcd.Members(), func(m operator.EtcdMember) bool { return m.Name == name && m.Healthy }) {
		return nil
	}
	ops, err := sw.inFlight(ctx)
	if err != nil {
		return err
	}
	sw.w.Note(NoteMemberFails)
	sw.w.Note(NoteFailureOfSize(*sw.intent.Replicas))
	scale := false
	for _, op := range ops {
		sw.w.Note(NoteFailureDuring(op))
		scale = scale || op == OpScaleUp || op == OpScaleDown
	}
	if scale {
		sw.w.Note(NoteFailureDuring(OpScale))
	}
	return nil
}

// armedFailure is a member failure waiting for a change to be in flight.
type armedFailure struct {
	choice uint64
	// wait is how many world steps inside a window it lets pass first, so
	// that it lands at different points of a change.
	wait int
}

// midChangePerturbation arms a member failure that the world fires once it
// observes a scale, an upgrade or a replacement in flight (a state-triggered
// fault, as Sieve injects them): random timing alone rarely lands a failure
// inside such a window. Nothing fires once the faults stop (heal disarms it).
func (sw *simWorld) midChangePerturbation() sim.Perturbation {
	return sim.Perturbation{Name: "member-fails-mid-change", Apply: sw.armFailure}
}

// armFailure is the perturbation's Apply.
func (sw *simWorld) armFailure(_ context.Context, choice uint64) (string, error) {
	if sw.deleted {
		return "cluster already deleted: no-op", nil
	}
	sw.armed = &armedFailure{choice: choice, wait: int(choice>>8) % 3}
	return fmt.Sprintf("a member failure is armed: it fires %d world step(s) into the next change in flight", sw.armed.wait), nil
}

// changeSpec is a user's edit (updateSpec) that, when it changes the spec,
// may arm a member failure for the change (armWithChange).
func (sw *simWorld) changeSpec(ctx context.Context, choice uint64, mutate func(*dbv1.DatabaseClusterSpec)) (string, error) {
	before := sw.intent
	desc, err := sw.updateSpec(ctx, mutate)
	if err != nil || sw.deleted || (*before.Replicas == *sw.intent.Replicas && before.Image == sw.intent.Image) {
		return desc, err
	}
	return sw.armWithChange(choice, desc), nil
}

// armWithChange arms a member failure for a change just made, when
// SimOptions.MidChangeFailures asks for one and none is armed; the failure's
// own choices come from the high bits of the change's choice.
func (sw *simWorld) armWithChange(choice uint64, desc string) string {
	if !sw.midChangeFailures || sw.armed != nil {
		return desc
	}
	sw.armed = &armedFailure{choice: choice >> 24, wait: int(choice>>32) % 3}
	return fmt.Sprintf("%s; a member failure is armed to fire %d world step(s) into the change", desc, sw.armed.wait)
}

// fireArmed is a world step: it fires the armed failure inside a window.
// It runs before the StatefulSet and etcd steps, so that the failure shows
// in readiness and in etcd's health within the same world step.
func (sw *simWorld) fireArmed(ctx context.Context) (bool, error) {
	if sw.armed == nil || sw.deleted {
		return false, nil
	}
	ops, err := sw.inFlight(ctx)
	if err != nil || len(ops) == 0 {
		return false, err
	}
	if sw.armed.wait > 0 {
		sw.armed.wait--
		return false, nil
	}
	var healthy []string
	for _, m := range sw.etcd.Members() {
		if m.Healthy && m.Name != "" {
			healthy = append(healthy, m.Name)
		}
	}
	if len(healthy) == 0 {
		return false, nil // nothing left to fail; stay armed
	}
	choice := sw.armed.choice
	sw.armed = nil
	// One member, or (one choice in two) two at once, as when a node
	// carrying two of them goes: beyond what a 3-member cluster tolerates,
	// within what a 5-member one does.
	victims := []string{healthy[choice%uint64(len(healthy))]}
	if n := uint64(len(healthy)); (choice>>20)%2 == 1 && n > 1 {
		first := choice % n
		victims = append(victims, healthy[(first+1+(choice>>24)%(n-1))%n])
	}
	how := (choice >> 16) % 3
	sw.w.Note(NoteMidChangeFired)
	if len(victims) > 1 {
		sw.w.Note(NoteTwoFail)
	}
	sw.w.Logf("the armed failure fires on %v during %v (%s)", victims, ops, [...]string{"etcd member down", "pod unready", "pod deleted"}[how])
	for _, name := range victims {
		if err := sw.noteFailure(ctx, name); err != nil {
			return false, err
		}
		switch how {
		case 0:
			sw.processes.Fail(name, true)
			sw.sts.SetReady(false, simNamespace, name)
		case 1:
			sw.sts.SetReady(false, simNamespace, name)
		default:
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: name}}
			if err := sw.w.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
	}
	return true, nil
}
