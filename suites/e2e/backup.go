package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// BackupSpec: a schedule of every minute produces verified backups on the
// cluster's snapshot claim, recorded in status.lastBackup; retention trims
// them to its count; a new cluster restored from the newest backup serves
// every key; removing spec.backup removes the CronJob.
func BackupSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "* * * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](2)},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "backup", 40)

	// Three successful runs, a minute apart: the third one's retention
	// (count 2) has deleted at least one older backup.
	WaitVerifiedBackups(ctx, t, in, c, 3, 0)
	last := c.Status.LastBackup.Snapshot
	g.Expect(last.TotalKeys).To(BeNumerically(">=", 40))

	// Retention (count 2): after three runs the claim holds two backups.
	g.Expect(c.Status.LastBackup.Retained).To(Equal(int32(2)), "backups left after the last run's retention")
	jobs := &batchv1.JobList{}
	g.Expect(in.Env.Client.List(ctx, jobs, client.InNamespace(in.Namespace), client.MatchingLabels(operator.BackupJobLabels(c)))).To(Succeed())
	g.Expect(len(jobs.Items)).To(BeNumerically("<=", 3+3), "the CronJob keeps at most three Jobs of each outcome")

	claim, file, ok := strings.Cut(strings.TrimPrefix(last.Location, "pvc/"), "/")
	g.Expect(ok).To(BeTrue(), "location %s", last.Location)
	g.Expect(claim).To(Equal(operator.SnapshotClaimName(c)))

	restored := reference.NewCluster(in.Namespace, "restored").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: claim, File: file}}
	CreateCluster(ctx, t, in, restored)
	ExpectKeys(ctx, t, in, restored, "backup", 40)

	g.Expect(Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Backup = nil })).To(Succeed())
	err := framework.PollFor(ctx, "the backup CronJob to go", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.BackupCronJobName(c)}, &batchv1.CronJob{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}

// WaitVerifiedBackups waits until n scheduled backups of c, each a new Job,
// were recorded as verified, the last one holding at least minKeys keys; a
// failed one ends the wait. It logs each as it comes and leaves c as last read.
func WaitVerifiedBackups(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, n int, minKeys int64) {
	t.Helper()
	succeeded := map[string]bool{}
	start := time.Now()
	err := framework.PollFor(ctx, fmt.Sprintf("%d verified scheduled backups", n), 5*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err.Error(), nil
		}
		lb := c.Status.LastBackup
		switch {
		case lb == nil:
			return false, "no backup recorded yet; conditions:\n" + framework.DescribeConditions(c.Status.Conditions), nil
		case !lb.Succeeded:
			return false, "", fmt.Errorf("backup %s failed: %s", lb.Job, lb.Message)
		case !succeeded[lb.Job]:
			succeeded[lb.Job] = true
			t.Logf("%s: backup %s verified at %s: revision %d, %d keys", time.Since(start).Round(time.Second), lb.Job, lb.Snapshot.Location, lb.Snapshot.Revision, lb.Snapshot.TotalKeys)
		}
		return len(succeeded) >= n && lb.Snapshot.TotalKeys >= minKeys, fmt.Sprintf("%d verified so far, last %s", len(succeeded), lb.Job), nil
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// BackupToBucketSpec: with an S3-compatible server in the namespace, a
// schedule of every minute stores verified backups in its bucket under the
// prefix, retention trims them there to two, and a new cluster restored
// from the newest object serves every key.
func BackupToBucketSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	s3 := StartS3Server(ctx, t, in, "backups")
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	bucket := dbv1.S3Bucket{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Prefix: "clusters/db/", Region: "us-east-1", CredentialsSecret: dbv1.SecretReference{Name: s3.Secret}}
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "* * * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](2)},
		Destination: dbv1.BackupDestination{S3: bucket.DeepCopy()},
	}
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "bucket", 40)

	WaitVerifiedBackups(ctx, t, in, c, 3, 40)
	last := c.Status.LastBackup
	g.Expect(last.Retained).To(Equal(int32(2)))
	key, ok := strings.CutPrefix(last.Snapshot.Location, "s3://backups/clusters/db/")
	g.Expect(ok).To(BeTrue(), "location %s", last.Snapshot.Location)
	keys := s3.Keys(ctx, t, in, "clusters/db/")
	g.Expect(keys).To(HaveLen(2), "retention keeps two backups in the bucket: %v", keys)
	g.Expect(keys).To(ContainElement("clusters/db/" + key))

	restored := reference.NewCluster(in.Namespace, "restored").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{S3: &dbv1.S3SnapshotSource{S3Bucket: bucket, Key: key}}
	CreateCluster(ctx, t, in, restored)
	ExpectKeys(ctx, t, in, restored, "bucket", 40)
	t.Logf("a cluster restored from %s serves all 40 keys", last.Snapshot.Location)
}
