package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// Observer samples, every Every, an operator's controller counters and the
// state of a set of pods, to draw them on the report's timeline.
type Observer struct {
	// Every is the sampling period (default 1s).
	Every time.Duration
	// Scrape reads the operator's metrics; nil skips the counters.
	Scrape func(ctx context.Context) (map[string]*dto.MetricFamily, error)
	// Controller names the controller whose counters are read.
	Controller string
	// Pods lists the pods to follow (the members and the operator's).
	Pods func(ctx context.Context) ([]corev1.Pod, error)

	mu     sync.Mutex
	ops    []report.OperatorSample
	pods   []report.PodEvent
	seen   map[string]podState
	last   time.Time // the previous pod sample
	cancel context.CancelFunc
	done   chan struct{}
}

type podState struct {
	uid      string
	restarts int32
	ready    bool
}

// Start samples until Stop or until ctx ends.
func (o *Observer) Start(ctx context.Context) {
	if o.Every == 0 {
		o.Every = time.Second
	}
	ctx, o.cancel = context.WithCancel(ctx)
	o.done = make(chan struct{})
	go func() {
		defer close(o.done)
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for {
			o.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// lastPodsWithin bounds the observer's last look at the pods as it stops.
const lastPodsWithin = 5 * time.Second

// Stop ends the sampling and returns what was seen. It reads the pods one
// last time: a run ends as soon as its resource converges, which may be
// within a sample of a pod turning ready, and that change (timed by the
// pod's Ready condition) is part of what was seen.
func (o *Observer) Stop() ([]report.OperatorSample, []report.PodEvent) {
	if o.cancel == nil {
		return nil, nil
	}
	o.cancel()
	<-o.done
	if o.Pods != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lastPodsWithin)
		if pods, err := o.Pods(ctx); err == nil {
			o.observePods(time.Now(), pods)
		}
		cancel()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops), slices.Clone(o.pods)
}

func (o *Observer) sample(ctx context.Context) {
	if o.Scrape != nil {
		sctx, cancel := context.WithTimeout(ctx, o.Every)
		fams, err := o.Scrape(sctx)
		cancel()
		s := report.OperatorSample{At: time.Now(), Up: err == nil}
		if err == nil {
			c := map[string]string{"controller": o.Controller}
			s.Reconciles = framework.SumSamples(fams, "controller_runtime_reconcile_total", c)
			s.Errors = framework.SumSamples(fams, "controller_runtime_reconcile_errors_total", c)
		}
		if ctx.Err() == nil {
			o.mu.Lock()
			o.ops = append(o.ops, s)
			o.mu.Unlock()
		}
	}
	if o.Pods != nil {
		pods, err := o.Pods(ctx)
		if err != nil || ctx.Err() != nil {
			return // a missed sample, not a change
		}
		o.observePods(time.Now(), pods)
	}
}

// observePods records how pods changed since the previous sample.
func (o *Observer) observePods(at time.Time, pods []corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	first := o.seen == nil
	now := map[string]podState{}
	for i := range pods {
		p := &pods[i]
		st := podState{uid: string(p.UID), ready: framework.PodReady(p)}
		for _, cs := range p.Status.ContainerStatuses {
			st.restarts += cs.RestartCount
		}
		key := p.Namespace + "/" + p.Name
		now[key] = st
		if first {
			continue
		}
		prev, ok := o.seen[key]
		switch {
		case !ok || prev.uid != st.uid:
			if ok {
				o.pods = append(o.pods, report.PodEvent{At: at, Pod: key, Event: report.PodDeleted})
			}
			o.pods = append(o.pods, report.PodEvent{At: at, Pod: key, Event: report.PodCreated})
		case st.restarts > prev.restarts:
			o.pods = append(o.pods, report.PodEvent{At: at, Pod: key, Event: report.PodRestarted})
		}
		if ok && prev.uid == st.uid && prev.ready == st.ready {
			continue
		}
		if (!ok || prev.uid != st.uid) && !st.ready {
			continue // a new pod starts unready: not news
		}
		ev := report.PodNotReady
		if st.ready {
			ev = report.PodReady
		}
		o.pods = append(o.pods, report.PodEvent{At: readyChanged(p, o.last, at), Pod: key, Event: ev})
	}
	if !first {
		var gone []string
		for key := range o.seen {
			if _, ok := now[key]; !ok {
				gone = append(gone, key)
			}
		}
		slices.Sort(gone)
		for _, key := range gone {
			o.pods = append(o.pods, report.PodEvent{At: at, Pod: key, Event: report.PodDeleted})
		}
	}
	o.seen, o.last = now, at
}

// readyChanged is when the pod's readiness last changed, as its Ready
// condition says, within (prev, at] when it says so (the kubelet's time,
// to the second; this machine's clock): sampling alone would place the
// change up to a sample later.
func readyChanged(p *corev1.Pod, prev, at time.Time) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady || c.LastTransitionTime.IsZero() {
			continue
		}
		t := c.LastTransitionTime.Time
		switch {
		case t.After(at):
			return at
		case !t.After(prev):
			return prev.Add(time.Millisecond)
		}
		return t
	}
	return at
}

// String is a short description of the event, for logs.
