// Package metrics defines the reference operator's own Prometheus metrics.
// They are registered on controller-runtime's registry by the manager, so they
// are served next to controller_runtime_reconcile_total and friends; tests
// register them on a registry of their own.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// With --metrics-secure the manager asks the API server who each scraper
// is and whether it may get the metrics path.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Names of the metrics, for tests and dashboards.
const (
	ReconcileDurationName = "gauntlet_databasecluster_reconcile_duration_seconds"
	MembersName           = "gauntlet_databasecluster_members"
	QuorumAtRiskName      = "gauntlet_databasecluster_quorum_at_risk"
)

// Outcomes of a reconcile pass, the label of the duration histogram.
const (
	OutcomeSuccess  = "success"
	OutcomeRequeue  = "requeue"
	OutcomeError    = "error"
	OutcomeTerminal = "terminal"
)

// Member states, the label of the members gauge.
const (
	StateHealthy   = "healthy"
	StateUnhealthy = "unhealthy"
	StateLearner   = "learner"
)

// Recorder holds the operator's collectors.
type Recorder struct {
	reconcileDuration *prometheus.HistogramVec
	members           *prometheus.GaugeVec
	quorumAtRisk      *prometheus.GaugeVec
}

// NewRecorder creates the collectors and registers them on reg.
func NewRecorder(reg prometheus.Registerer) *Recorder {
	r := &Recorder{
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ReconcileDurationName,
			Help:    "Duration of DatabaseCluster reconcile passes, by outcome (success, requeue, error, terminal).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"outcome"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MembersName,
			Help: "Members of each DatabaseCluster by state (healthy, unhealthy, learner).",
		}, []string{"namespace", "name", "state"}),
		quorumAtRisk: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: QuorumAtRiskName,
			Help: "1 when losing one more healthy voting member would lose quorum (or quorum is already lost), else 0.",
		}, []string{"namespace", "name"}),
	}
	reg.MustRegister(r.reconcileDuration, r.members, r.quorumAtRisk)
	return r
}

// ObserveReconcile records the duration of one pass.
func (r *Recorder) ObserveReconcile(outcome string, d time.Duration) {
	if r == nil {
		return
	}
	r.reconcileDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// SetMembers records the member counts of one cluster and whether its quorum
// is at risk.
func (r *Recorder) SetMembers(namespace, name string, healthy, unhealthy, learners int, atRisk bool) {
	if r == nil {
		return
	}
	r.members.WithLabelValues(namespace, name, StateHealthy).Set(float64(healthy))
	r.members.WithLabelValues(namespace, name, StateUnhealthy).Set(float64(unhealthy))
	r.members.WithLabelValues(namespace, name, StateLearner).Set(float64(learners))
	v := 0.0
	if atRisk {
		v = 1
	}
	r.quorumAtRisk.WithLabelValues(namespace, name).Set(v)
}

// Forget drops the series of a deleted cluster.
func (r *Recorder) Forget(namespace, name string) {
	if r == nil {
		return
	}
	for _, s := range []string{StateHealthy, StateUnhealthy, StateLearner} {
		r.members.DeleteLabelValues(namespace, name, s)
	}
	r.quorumAtRisk.DeleteLabelValues(namespace, name)
}
