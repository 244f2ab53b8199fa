// Package jobs reads the outcome of the batch Jobs the operator runs (the
// final snapshot, restores).
package jobs

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Finished reports whether the Job has the condition (JobComplete or
// JobFailed) set to True.
func Finished(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Message is the condition's reason and message, for errors and status.
func Message(job *batchv1.Job, t batchv1.JobConditionType) string {
	for _, c := range job.Status.Conditions {
		if c.Type == t {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return "no reason given"
}

// FinishedAt tells whether the Job finished (complete or failed) and when.
func FinishedAt(job *batchv1.Job) (time.Time, bool) {
	if Finished(job, batchv1.JobComplete) && job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time, true
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
