package reference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// simBackupEvery is how often, in simulated seconds, the simulated CronJob
// controller starts a backup.
const simBackupEvery = 30

// simBackups plays the CronJob controller and the backup Job's pod for the
// simulation: on schedule, while the operator's CronJob exists, it runs the
// operator's own backup code (operator.RunBackup: verification, naming,
// retention) against an in-memory destination, and leaves the Job and its
// pod's report as the kubelet would. A perturbation makes the next run fail.
type simBackups struct {
	w     *sim.World
	key   client.ObjectKey
	clock func() time.Time
	// stored is the destination: backup name → revision it holds.
	stored map[string]int64
	// failNext, when set, is why the next run fails.
	failNext string
	// runs counts the Jobs started; lastRun is when the last one started.
	runs    int
	lastRun time.Time
	// succeeded names the Jobs that stored a verified backup (the honesty
	// check); lastFailed says whether the last run failed; locations are
	// where every stored backup was.
	succeeded  map[string]bool
	lastFailed bool
	locations  map[string]bool
	// violation is set when retention deleted the newest backup.
	violation string
}

func newSimBackups(w *sim.World, key client.ObjectKey, clock func() time.Time) *simBackups {
	return &simBackups{w: w, key: key, clock: clock, stored: map[string]int64{}, succeeded: map[string]bool{}, locations: map[string]bool{}}
}

// Step starts and finishes one backup when one is due.
func (b *simBackups) Step(ctx context.Context) (bool, error) {
	now := b.clock()
	if !b.lastRun.IsZero() && now.Sub(b.lastRun) < simBackupEvery*time.Second {
		return false, nil
	}
	c := &dbv1.DatabaseCluster{}
	if err := b.w.Client.Get(ctx, b.key, c); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	cj := &batchv1.CronJob{}
	if err := b.w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.BackupCronJobName(c)}, cj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	b.lastRun, b.runs = now, b.runs+1
	name := fmt.Sprintf("%s-%d", cj.Name, b.runs)
	failure := b.failNext
	b.failNext = ""
	policy := operator.BackupPolicy{}
	if r := c.Spec.Backup; r != nil {
		if r.Retention.Count != nil {
			policy.Count = int(*r.Retention.Count)
		}
		if r.Retention.MaxAge != nil {
			policy.MaxAge = r.Retention.MaxAge.Duration
		}
	}
	report := operator.RunBackup(ctx, operator.BackupOptions{
		Cluster: c.Name, Store: (*simStore)(b), Policy: policy,
		Save: func(context.Context, string) error {
			if failure != "" {
				return errors.New(failure)
			}
			return nil
		},
		Verify: func(string) (operator.BackupFileStatus, error) {
			return operator.BackupFileStatus{Hash: 1, Revision: int64(b.runs), TotalKey: 1, TotalSize: 4096}, nil
		},
		Now: func() time.Time { return now },
	})
	if report.Succeeded {
		b.succeeded[name] = true
	}
	b.lastFailed = !report.Succeeded
	return true, b.leaveJob(ctx, c, name, now, report)
}

// leaveJob records the finished Job and its pod's termination message.
func (b *simBackups) leaveJob(ctx context.Context, c *dbv1.DatabaseCluster, name string, at time.Time, report operator.BackupReport) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: operator.BackupJobLabels(c)}}
	if err := b.w.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	when := metav1.NewTime(at)
	cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: when}
	if !report.Succeeded {
		cond = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: when, Reason: "BackoffLimitExceeded"}
	} else {
		job.Status.CompletionTime = &when
	}
	job.Status.Conditions = []batchv1.JobCondition{cond}
	if err := b.w.Client.Status().Update(ctx, job); err != nil {
		return err
	}
	msg, err := json.Marshal(report)
	if err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-pod", Labels: map[string]string{batchv1.JobNameLabel: name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: operator.BackupContainer, Image: BackupImage}}},
	}
	if err := b.w.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: operator.BackupContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: string(msg), FinishedAt: when},
	}}}
	return b.w.Client.Status().Update(ctx, pod)
}

// perturbation makes the next backup fail, at saving or at verifying.
func (b *simBackups) perturbation() sim.Perturbation {
	return sim.Perturbation{Name: "backup-fails", Apply: func(_ context.Context, choice uint64) (string, error) {
		b.failNext = []string{"no endpoint gave a snapshot", "snapshot file integrity check failed"}[choice%2]
		return "the next backup fails: " + b.failNext, nil
	}}
}

// heal stops failing backups; when the last one failed, the next one runs at
// once, as the next scheduled run would once the fault is gone.
func (b *simBackups) heal() {
	b.failNext = ""
	if b.lastFailed {
		b.lastRun = time.Time{}
	}
}

// invariants: what a backup schedule must keep whatever happens.
func (b *simBackups) invariants() []sim.Invariant {
	return []sim.Invariant{
		{Name: "once a backup succeeded, a verified backup is always kept", Kind: sim.Safety, Check: b.checkOneKept},
		{Name: "retention never deletes the newest backup", Kind: sim.Safety, Check: func(context.Context, sim.StepInfo) error {
			if b.violation != "" {
				return errors.New(b.violation)
			}
			return nil
		}},
		{Name: "lastBackup says succeeded only for a Job that stored a verified backup", Kind: sim.Honesty, Check: b.checkLastBackupHonest},
	}
}

func (b *simBackups) checkOneKept(context.Context, sim.StepInfo) error {
	if len(b.succeeded) > 0 && len(b.stored) == 0 {
		return errors.New("a backup succeeded before, but the destination holds none")
	}
	return nil
}

func (b *simBackups) checkLastBackupHonest(ctx context.Context, _ sim.StepInfo) error {
	c := &dbv1.DatabaseCluster{}
	if err := b.w.Client.Get(ctx, b.key, c); err != nil {
		return client.IgnoreNotFound(err)
	}
	lb := c.Status.LastBackup
	switch {
	case lb == nil:
		return nil
	case lb.Succeeded && !b.succeeded[lb.Job]:
		return fmt.Errorf("status.lastBackup says Job %s succeeded, but it stored no verified backup", lb.Job)
	case lb.Succeeded && (lb.Snapshot == nil || !b.locations[lb.Snapshot.Location]):
		return fmt.Errorf("status.lastBackup of Job %s names a snapshot that was never stored: %+v", lb.Job, lb.Snapshot)
	case !lb.Succeeded && b.succeeded[lb.Job]:
		return fmt.Errorf("status.lastBackup says Job %s failed, but it stored a verified backup", lb.Job)
	}
	return nil
}

// simStore is the in-memory destination; retention's deletions are checked
// against the newest backup as they happen.
type simStore simBackups

func (s *simStore) List(context.Context) ([]string, error) {
	return slices.Sorted(maps.Keys(s.stored)), nil
}

func (s *simStore) Put(_ context.Context, name, _ string) error {
	s.stored[name] = int64(s.runs)
	s.locations[s.Location(name)] = true
	return nil
}

// Delete deletes, and records a violation when the backup is the newest:
// retention must never delete it.
func (s *simStore) Delete(_ context.Context, name string) error {
	if name == slices.Max(slices.Collect(maps.Keys(s.stored))) { // names sort by time
		s.violation = "retention deleted the newest backup, " + name
	}
	delete(s.stored, name)
	return nil
}

func (s *simStore) Location(name string) string { return "sim://" + name }
