package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestBackupCronJobOnTheAPIServer: spec.backup becomes a CronJob the API
// server accepts (its own validation of the schedule and the pod template
// included), owned by the cluster, beside the snapshot claim; a new schedule
// updates it; removing spec.backup deletes it and keeps the claim.
func TestBackupCronJobOnTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "backup-")
	c := reference.NewCluster(ns, "nightly").WithoutUID().Build()
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "0 3 * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](7), MaxAge: &metav1.Duration{Duration: 336 * time.Hour}},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
	create(t, c)

	key := client.ObjectKey{Namespace: ns, Name: operator.BackupCronJobName(c)}
	cronJob := func(what string, match func(*batchv1.CronJob) bool) *batchv1.CronJob {
		t.Helper()
		cj := &batchv1.CronJob{}
		err := framework.PollFor(ctx, what, convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
			if err := env.Client.Get(ctx, key, cj); err != nil {
				return false, err.Error(), nil
			}
			return match(cj), fmt.Sprintf("schedule %q", cj.Spec.Schedule), nil
		})
		g.Expect(err).NotTo(HaveOccurred())
		return cj
	}
	cj := cronJob("the backup CronJob", func(cj *batchv1.CronJob) bool { return cj.Spec.Schedule == "0 3 * * *" })
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
	g.Expect(metav1.IsControlledBy(cj, c)).To(BeTrue())
	g.Expect(cj.Spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent))
	ctr := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	g.Expect(ctr.Image).To(Equal(backupImage))
	g.Expect(ctr.Args).To(ContainElements("--retain-count=7", "--retain-max-age=336h0m0s"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: operator.SnapshotClaimName(c)}, &corev1.PersistentVolumeClaim{})).To(Succeed())

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		c.Spec.Backup.Schedule = "*/15 * * * *"
		return env.Client.Update(ctx, c)
	})).To(Succeed())
	cronJob("the CronJob's new schedule", func(cj *batchv1.CronJob) bool { return cj.Spec.Schedule == "*/15 * * * *" })

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		c.Spec.Backup = nil
		return env.Client.Update(ctx, c)
	})).To(Succeed())
	err := framework.PollFor(ctx, "the CronJob to be deleted", convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, key, &batchv1.CronJob{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: operator.SnapshotClaimName(c)}, &corev1.PersistentVolumeClaim{})).To(Succeed(),
		"the claim keeps the backups already taken")
}
