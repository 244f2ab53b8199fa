package framework

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// JobSimulator plays the Job controller and the kubelets that run Jobs: on
// each Step every unfinished Job in Namespace succeeds, unless Fail says it
// fails. Jobs that need real work done (a snapshot, a restore) are the
// test's to fake through Fail and their side effects.
type JobSimulator struct {
	Client    client.Client
	Namespace string
	// Fail, if set, decides which Jobs fail (with BackoffLimitExceeded).
	Fail func(*batchv1.Job) bool
	// Done, if set, runs for each Job as it succeeds, for its side effects.
	Done func(ctx context.Context, job *batchv1.Job) error
}

// Step finishes every unfinished Job and reports whether it did anything.
func (j *JobSimulator) Step(ctx context.Context) (bool, error) {
	jobs := &batchv1.JobList{}
	if err := j.Client.List(ctx, jobs, client.InNamespace(j.Namespace)); err != nil {
		return false, fmt.Errorf("job simulator: listing Jobs: %w", err)
	}
	changed := false
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if finished(job) || !job.DeletionTimestamp.IsZero() {
			continue
		}
		now := metav1.Now()
		cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}
		if j.Fail != nil && j.Fail(job) {
			cond = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
			job.Status.Failed++
		} else {
			if j.Done != nil {
				if err := j.Done(ctx, job); err != nil {
					return changed, err
				}
			}
			job.Status.Succeeded++
			job.Status.CompletionTime = &now
		}
		job.Status.Conditions = append(job.Status.Conditions, cond)
		if err := j.Client.Status().Update(ctx, job); err != nil {
			return changed, fmt.Errorf("job simulator: finishing Job %s: %w", job.Name, err)
		}
		changed = true
	}
	return changed, nil
}

func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
