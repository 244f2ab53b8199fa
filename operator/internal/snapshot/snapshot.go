// Package snapshot takes a DatabaseCluster's final snapshot with a Job: the
// Job saves the snapshot with etcdctl through the cluster's client Service
// into a claim the cluster does not own (so it outlives the cluster), then
// verifies the file with etcdutl; the operator reads etcdutl's JSON report
// from the verify container's log and records it.
package snapshot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/jobs"
)

// LogReader reads a container's log.
type LogReader interface {
	ContainerLog(ctx context.Context, namespace, pod, container string) (string, error)
}

// PodLogs reads logs through the API server (pods/log).
type PodLogs struct{ Clientset kubernetes.Interface }

// ContainerLog returns the whole log of one container.
func (p PodLogs) ContainerLog(ctx context.Context, namespace, pod, container string) (string, error) {
	rc, err := p.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	return string(b), err
}

// Job is the Job-based Snapshotter.
type Job struct {
	// Client reads and writes claims, Jobs and pods.
	Client client.Client
	// Logs reads the verify container's report.
	Logs LogReader
	// Builders holds cluster-wide settings (the cluster domain).
	Builders builders.Options
}

// errBadReport: the Job ran but its report does not show a usable snapshot.
var errBadReport = errors.New("the snapshot did not verify")

// ErrClaimTaken says the snapshot claim exists and holds another cluster's
// snapshots.
var ErrClaimTaken = errors.New("the snapshot claim exists and belongs to another cluster")

// FinalSnapshot ensures the claim and the Job, and returns the verified
// snapshot once the Job has succeeded; (nil, nil) while it runs. A failed
// Job is reported and deleted, so that the next attempt starts afresh.
func (j *Job) FinalSnapshot(ctx context.Context, c *dbv1.DatabaseCluster) (*dbv1.SnapshotStatus, error) {
	if err := EnsureClaim(ctx, j.Client, c); err != nil {
		return nil, err
	}
	job := &batchv1.Job{}
	switch err := j.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builders.SnapshotJobName(c)}, job); {
	case apierrors.IsNotFound(err):
		if err := j.Client.Create(ctx, builders.SnapshotJob(c, j.Builders)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the snapshot Job: %w", err)
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the snapshot Job: %w", err)
	}
	switch {
	case jobs.Finished(job, batchv1.JobFailed):
		msg := jobs.Message(job, batchv1.JobFailed)
		if err := j.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("the snapshot Job failed (%s), and deleting it failed: %w", msg, err)
		}
		return nil, fmt.Errorf("the snapshot Job failed: %s", msg)
	case !jobs.Finished(job, batchv1.JobComplete):
		return nil, nil
	}
	report, err := j.report(ctx, job)
	if errors.Is(err, errBadReport) {
		// The file did not verify: take it again rather than keep it.
		if derr := j.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(derr) != nil {
			return nil, fmt.Errorf("%w (and deleting the Job failed: %w)", err, derr)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	takenAt := metav1.Now()
	if job.Status.CompletionTime != nil {
		takenAt = *job.Status.CompletionTime
	}
	return &dbv1.SnapshotStatus{
		Location:  fmt.Sprintf("pvc/%s/%s", builders.SnapshotClaimName(c), builders.SnapshotFile(c)),
		TakenAt:   takenAt,
		Revision:  report.Revision,
		Hash:      int64(report.Hash),
		TotalKeys: int64(report.TotalKey),
		SizeBytes: report.TotalSize,
	}, nil
}

// EnsureClaim creates the claim that keeps c's snapshots and backups, unless
// it exists; one that holds another cluster's snapshots is ErrClaimTaken.
func EnsureClaim(ctx context.Context, cl client.Client, c *dbv1.DatabaseCluster) error {
	want := builders.SnapshotClaim(c)
	existing := &corev1.PersistentVolumeClaim{}
	switch err := cl.Get(ctx, client.ObjectKeyFromObject(want), existing); {
	case apierrors.IsNotFound(err):
		if err := cl.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the snapshot claim: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the snapshot claim: %w", err)
	case existing.Labels[builders.LabelSnapshotOf] != c.Name:
		return fmt.Errorf("%w: %s/%s", ErrClaimTaken, existing.Namespace, existing.Name)
	}
	return nil
}

// Report is etcdutl's snapshot status, as `--write-out=json` prints it.
type Report struct {
	Hash      uint32 `json:"hash"`
	Revision  int64  `json:"revision"`
	TotalKey  int    `json:"totalKey"`
	TotalSize int64  `json:"totalSize"`
	Version   string `json:"version"`
}

// ParseReport finds etcdutl's JSON report in a log (the last line that is
// one; etcdutl may log other lines around it) and checks that it describes
// a usable snapshot.
func ParseReport(log string) (*Report, error) {
	var found *Report
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r Report
		if err := json.Unmarshal([]byte(line), &r); err == nil && strings.Contains(line, `"revision"`) {
			found = &r
		}
	}
	switch {
	case found == nil:
		return nil, fmt.Errorf("no etcdutl snapshot status report in the verify log: %q", truncate(log, 400))
	// A cluster that never stored a key snapshots at revision 0 with no
	// keys (seen on kind): valid. No bytes or no hash is not.
	case found.Revision < 0 || found.TotalSize <= 0 || found.Hash == 0:
		return nil, fmt.Errorf("etcdutl reports an unusable snapshot: %+v", *found)
	}
	return found, nil
}

func (j *Job) report(ctx context.Context, job *batchv1.Job) (*Report, error) {
	pods := &corev1.PodList{}
	if err := j.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("listing the snapshot Job's pods: %w", err)
	}
	lastErr := fmt.Errorf("the snapshot Job %s succeeded but none of its pods is left to read the report from", job.Name)
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		log, err := j.Logs.ContainerLog(ctx, p.Namespace, p.Name, builders.SnapshotVerifyContainer)
		if err != nil {
			lastErr = fmt.Errorf("reading the verify log of %s: %w", p.Name, err)
			continue
		}
		r, err := ParseReport(log)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errBadReport, err)
		}
		return r, nil
	}
	return nil, lastErr
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
