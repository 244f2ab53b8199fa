package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/workload"
)

// SeriesBucket is the width of the workload's buckets in a Series.
const SeriesBucket = 100 * time.Millisecond

// Series is what a scenario looked like over time, for the report's
// timeline: the workload's throughput and latency in fixed buckets, the
// operator's reconcile counters as it was sampled, and what happened to
// the pods.
type Series struct {
	// Start is when the workload started: bucket i covers
	// [Start + i*BucketMillis, Start + (i+1)*BucketMillis).
	Start        time.Time `json:"start"`
	BucketMillis int64     `json:"bucketMillis"`
	// Writes and Reads are the operations acknowledged in each bucket;
	// Errors are those that failed or ended ambiguous there.
	Writes []int `json:"writes,omitempty"`
	Reads  []int `json:"reads,omitempty"`
	Errors []int `json:"errors,omitempty"`
	// LatencyP50Millis and LatencyMaxMillis are the latencies of the
	// operations that completed in each bucket (0 where none did).
	LatencyP50Millis []float64 `json:"latencyP50Millis,omitempty"`
	LatencyMaxMillis []float64 `json:"latencyMaxMillis,omitempty"`
	// Operator is the operator's reconcile counters, sampled.
	Operator []OperatorSample `json:"operator,omitempty"`
	// Pods is every change seen in the watched pods.
	Pods []PodEvent `json:"pods,omitempty"`
}

// OperatorSample is one scrape of the operator's controller counters.
// Counters restart from zero when the operator does.
type OperatorSample struct {
	At         time.Time `json:"at"`
	Up         bool      `json:"up"` // the scrape answered
	Reconciles float64   `json:"reconciles"`
	Errors     float64   `json:"errors,omitempty"`
}

// Pod event kinds.
const (
	PodCreated   = "created"
	PodDeleted   = "deleted"
	PodRestarted = "restarted"
	PodReady     = "ready"
	PodNotReady  = "not-ready"
)

// PodEvent is one change of a watched pod.
type PodEvent struct {
	At    time.Time `json:"at"`
	Pod   string    `json:"pod"` // namespace/name
	Event string    `json:"event"`
}

// SetWorkload fills the workload buckets from a ledger.
func (s *Series) SetWorkload(l *workload.Ledger) {
	s.Start, s.BucketMillis = l.Start, SeriesBucket.Milliseconds()
	bs := l.Buckets(SeriesBucket)
	s.Writes, s.Reads, s.Errors = make([]int, len(bs)), make([]int, len(bs)), make([]int, len(bs))
	s.LatencyP50Millis, s.LatencyMaxMillis = make([]float64, len(bs)), make([]float64, len(bs))
	for i, b := range bs {
		s.Writes[i], s.Reads[i], s.Errors[i] = b.Writes, b.Reads, b.Errors
		s.LatencyP50Millis[i] = float64(b.P50.Microseconds()) / 1000
		s.LatencyMaxMillis[i] = float64(b.Max.Microseconds()) / 1000
	}
}

func (e PodEvent) String() string { return fmt.Sprintf("%s %s", e.Pod, e.Event) }

// Sample is the object's conditions as one watch event delivered them.
type Sample struct {
	At         time.Time         `json:"at"`
	Conditions map[string]string `json:"conditions"` // type -> "True/Reason"
}

// Status is the status (True, False or Unknown) the sample holds for the
// condition type, or "" when the object had no such condition.
func (s Sample) Status(typ string) string {
	st, _, _ := strings.Cut(s.Conditions[typ], "/")
	return st
}
