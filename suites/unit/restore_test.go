package unit

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestRestoreFromSnapshot creates a cluster with spec.restoreFrom: each
// member's claim is created and restored by its own Job, one Job at a time,
// before the StatefulSet exists; the first Job fails once (Degraded says
// so, and it is retried); then the members start and the cluster becomes
// Available.
func TestRestoreFromSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "restored").Build()
	c.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "db-snapshots", File: "db-20261122T100000Z.db"}}
	w := reference.NewWorld(t, c, snapshotClaim(c.Namespace, "db-snapshots"))
	failures := 1
	var restored []string
	jobs := &framework.JobSimulator{Client: w.Client, Namespace: c.Namespace,
		Fail: func(job *batchv1.Job) bool {
			if failures > 0 {
				failures--
				return true
			}
			return false
		},
		Done: func(ctx context.Context, job *batchv1.Job) error {
			// While a restore runs, no member may start and no other
			// restore may run.
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the StatefulSet exists while %s runs (err %w)", job.Name, err)
			}
			restored = append(restored, job.Name)
			return nil
		}}
	w.Driver.Env = append([]framework.EnvStep{jobs.Step}, w.Driver.Env...)

	// After the finalizer's, the first pass creates db-0's claim and
	// restore Job, nothing else.
	w.AddFinalizer(t, c)
	_, err := w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	job := &batchv1.Job{}
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "restored-restore-0"}, job)).To(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{
		"snapshot", "restore", "/snapshots/db-20261122T100000Z.db",
		"--name=restored-0",
		"--initial-cluster=restored-0=http://restored-0.restored.default.svc.cluster.local:2380,restored-1=http://restored-1.restored.default.svc.cluster.local:2380,restored-2=http://restored-2.restored.default.svc.cluster.local:2380",
		"--initial-cluster-token=default-restored-" + string(c.UID),
		"--initial-advertise-peer-urls=http://restored-0.restored.default.svc.cluster.local:2380",
		"--data-dir=/var/lib/etcd/data",
	}))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-restored-0"}, &corev1.PersistentVolumeClaim{})).To(Succeed())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonRestoring).WithMessageContaining("restored-0"))

	// The world failed that Job: the next pass reports it and retries.
	_, err = w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonRestoreFailed).WithMessageContaining("BackoffLimitExceeded"))

	settle(t, w, c)
	g.Expect(restored).To(Equal([]string{"restored-restore-0", "restored-restore-1", "restored-restore-2"}))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
	g.Expect(w.Etcd.Members()).To(HaveLen(3))
}

func snapshotClaim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// TestRestoreFromAMissingClaim: a restore source that does not exist stops
// the pass with Progressing=False/Blocked naming the field and the claim, and
// creates nothing; once the claim appears, the restore starts.
func TestRestoreFromAMissingClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "restored").Build()
	c.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "gone-snapshots", File: "gone.db"}}
	w := reference.NewWorld(t, c)
	w.AddFinalizer(t, c)

	res, err := w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Result.RequeueAfter).To(Equal(operator.MissingReferenceRecheck))
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining(`spec.restoreFrom.volume.claimName: PersistentVolumeClaim "gone-snapshots" does not exist`))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "restored-restore-0"}, &batchv1.Job{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-restored-0"}, &corev1.PersistentVolumeClaim{})).To(Satisfy(apierrors.IsNotFound))

	g.Expect(w.Client.Create(ctx, snapshotClaim(c.Namespace, "gone-snapshots"))).To(Succeed())
	_, err = w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonRestoring))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "restored-restore-0"}, &batchv1.Job{})).To(Succeed())
}

// TestMissingStorageClass: a StorageClass that does not exist is named on
// Progressing within one pass, before any member is created; once it exists
// the members are created.
func TestMissingStorageClass(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	c.Spec.Storage.StorageClassName = ptr.To("fast-ssd")
	w := reference.NewWorld(t, c)
	w.AddFinalizer(t, c)

	_, err := w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining(`spec.storage.storageClassName: StorageClass "fast-ssd" does not exist`))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}, &appsv1.StatefulSet{})).To(Satisfy(apierrors.IsNotFound))

	g.Expect(w.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast-ssd"}, Provisioner: "example.com/ssd"})).To(Succeed())
	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
}

// TestRestoreFromABucket: a bucket source waits for its credentials Secret
// (Blocked, naming the field); then each restore Job first fetches the
// object with /backup from the operator's image; a fetch that fails shows
// its own message in Degraded (RestoreFailed), not only the Job's reason.
func TestRestoreFromABucket(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "restored").Build()
	c.Spec.RestoreFrom = &dbv1.RestoreSource{S3: &dbv1.S3SnapshotSource{
		S3Bucket: dbv1.S3Bucket{Endpoint: "https://s3.example.com", Bucket: "backups", Prefix: "prod/", CredentialsSecret: dbv1.SecretReference{Name: "s3-keys"}},
		Key:      "db-backup-20261124T030000Z.db",
	}}
	w := reference.NewWorld(t, c)
	w.AddFinalizer(t, c)
	_, err := w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining(`spec.restoreFrom.s3.credentialsSecret: Secret "s3-keys" does not exist`))

	g.Expect(w.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "s3-keys"},
		Data: map[string][]byte{"accessKeyID": []byte("ak"), "secretAccessKey": []byte("sk")}})).To(Succeed())
	_, err = w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonRestoring).
		WithMessageContaining("from s3://backups/prod/db-backup-20261124T030000Z.db"))
	job := &batchv1.Job{}
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "restored-restore-0"}, job)).To(Succeed())
	fetch := job.Spec.Template.Spec.InitContainers[0]
	g.Expect(fetch.Image).To(Equal(reference.BackupImage))
	g.Expect(fetch.Args).To(ContainElements("fetch", "--s3-bucket=backups", "--s3-prefix=prod/", "--key=db-backup-20261124T030000Z.db", "--to=/work/snapshot.db"))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args[:3]).To(Equal([]string{"snapshot", "restore", "/work/snapshot.db"}))

	// The fetch fails: the object is not there.
	g.Expect(w.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "restored-restore-0-x", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Message: "downloading s3://backups/prod/db-backup-20261124T030000Z.db: The specified key does not exist.",
		}}}}}})).To(Succeed())
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	g.Expect(w.Client.Status().Update(ctx, job)).To(Succeed())
	_, err = w.Driver.Pass(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonRestoreFailed).
		WithMessageContaining("fetch: downloading s3://backups/prod/db-backup-20261124T030000Z.db: The specified key does not exist."))
}
