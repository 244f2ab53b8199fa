// Package jobs reads the outcome of the batch Jobs the operator runs (the
// final snapshot, restores).
package jobs

import (
	"strings"

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
