package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

func observedPod(name, uid string, restarts int32, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID(uid)},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", RestartCount: restarts}},
		},
	}
}

func TestObserverRecordsPodChanges(t *testing.T) {
	g := NewWithT(t)
	o := &Observer{}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := [][]corev1.Pod{
		{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 0, true), observedPod("db-2", "c", 0, true)},
		{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 1, false), observedPod("db-2", "c", 0, true)}, // container restarted
		{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 1, true)},                                     // db-2 gone
		{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 1, true), observedPod("db-2", "d", 0, false)}, // back, unready
		{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 1, true), observedPod("db-2", "d", 0, true)},
		{observedPod("db-0", "e", 0, true), observedPod("db-1", "b", 1, true), observedPod("db-2", "d", 0, true)}, // replaced between samples
	}
	for i, pods := range steps {
		o.observePods(at(i), pods)
	}
	g.Expect(o.pods).To(Equal([]report.PodEvent{
		{At: at(1), Pod: "db/db-1", Event: report.PodRestarted},
		{At: at(1), Pod: "db/db-1", Event: report.PodNotReady},
		{At: at(2), Pod: "db/db-1", Event: report.PodReady},
		{At: at(2), Pod: "db/db-2", Event: report.PodDeleted},
		{At: at(3), Pod: "db/db-2", Event: report.PodCreated},
		{At: at(4), Pod: "db/db-2", Event: report.PodReady},
		{At: at(5), Pod: "db/db-0", Event: report.PodDeleted},
		{At: at(5), Pod: "db/db-0", Event: report.PodCreated},
		{At: at(5), Pod: "db/db-0", Event: report.PodReady},
	}), "the first sample is the baseline, not news")
}

func TestObserverTimesReadinessFromTheCondition(t *testing.T) {
	g := NewWithT(t)
	o := &Observer{}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	changed := func(p corev1.Pod, at time.Time) corev1.Pod {
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
		return p
	}
	o.observePods(at(0), []corev1.Pod{observedPod("db-0", "a", 0, true), observedPod("db-1", "b", 0, true), observedPod("db-2", "c", 0, true)})
	o.observePods(at(1000), []corev1.Pod{
		changed(observedPod("db-0", "a", 0, false), at(400)),  // the kubelet's time, within the samples
		changed(observedPod("db-1", "b", 0, false), at(-500)), // truncated to before the last sample
		observedPod("db-2", "c", 0, false),                    // no time given
	})
	g.Expect(o.pods).To(Equal([]report.PodEvent{
		{At: at(400), Pod: "db/db-0", Event: report.PodNotReady},
		{At: at(1), Pod: "db/db-1", Event: report.PodNotReady},
		{At: at(1000), Pod: "db/db-2", Event: report.PodNotReady},
	}))
}

func TestObserverReadsThePodsOnceMoreWhenStopped(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	ready := false
	sampled := make(chan struct{}, 1)
	o := &Observer{Every: time.Hour, Pods: func(context.Context) ([]corev1.Pod, error) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case sampled <- struct{}{}:
		default:
		}
		return []corev1.Pod{observedPod("db-0", "a", 0, ready)}, nil
	}}
	o.Start(t.Context())
	<-sampled // the first sample: db-0 unready
	mu.Lock()
	ready = true
	mu.Unlock()
	_, events := o.Stop()
	g.Expect(events).To(HaveLen(1))
	g.Expect(events[0].Event).To(Equal(report.PodReady), "seen by the last read at Stop, not a sample an hour later")
}
