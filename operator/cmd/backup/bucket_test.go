package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup/bucket"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup/etcdsnapshot"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdlocal"
)

// EnvVersitygw names the variable the tests read the versitygw binary from
// (make test-etcd builds it with tools/bins/build.sh versitygw).
const EnvVersitygw = "GAUNTLET_VERSITYGW_BIN"

// startVersitygw runs a real S3-compatible server (versitygw, posix backend)
// on loopback with one empty bucket, until the test ends, and returns its URL.
func startVersitygw(t *testing.T, bucketName, access, secret string) string {
	t.Helper()
	bin := os.Getenv(EnvVersitygw)
	if bin == "" {
		t.Fatalf("%s is not set: run through make test-etcd, which builds versitygw", EnvVersitygw)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, bucketName), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--access", access, "--secret", secret, "--port", addr, "posix", root)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw log:\n%s", log.String())
		}
	})
	url := "http://" + addr
	var last error
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if last = err; err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("versitygw did not answer at %s within 10s: %v (last: %v)\n%s", url, err, last, log.String())
	}
	return url
}

// TestBackupToABucketOnVersitygw runs the backup program with the CronJob's
// arguments for a bucket destination against real etcd and a real
// S3-compatible server: backups land under the prefix, retention trims them
// there, the newest downloads and verifies, and wrong credentials are a
// failed run with a report that says so.
func TestBackupToABucketOnVersitygw(t *testing.T) {
	g := NewWithT(t)
	const access, secret = "gauntlet-test", "gauntlet-test-secret"
	endpoint := startVersitygw(t, "backups", access, secret)
	local, _ := etcdWithKeys(t, 7)

	c := backupCluster()
	c.Spec.Backup.Destination = dbv1.BackupDestination{S3: &dbv1.S3Bucket{
		Endpoint: endpoint, Bucket: "backups", Prefix: "clusters/ns/db/", Region: "us-east-1",
		CredentialsSecret: dbv1.SecretReference{Name: "s3-keys"},
	}}
	args := jobArgs(t, c, local.ClientURL(0), "", t.TempDir())
	t.Setenv(EnvAccessKeyID, access)
	t.Setenv(EnvSecretAccessKey, secret)
	reports := runBackups(t, args, 2)
	first, second := reports[0], reports[1]
	g.Expect(first.Location).To(Equal("s3://backups/clusters/ns/db/" + first.Name))
	g.Expect(first.TotalKeys).To(BeNumerically(">=", 7))
	g.Expect(second.Deleted).To(Equal([]string{first.Name}), "a retention of one keeps only the newest")
	t.Logf("stored %s (revision %d, %d keys), then %s; retention deleted %v", first.Location, first.Revision, first.TotalKeys, second.Location, second.Deleted)

	b, err := bucket.New(bucket.Options{Endpoint: endpoint, Bucket: "backups", Prefix: "clusters/ns/db/", Region: "us-east-1", AccessKeyID: access, SecretAccessKey: secret})
	g.Expect(err).NotTo(HaveOccurred())
	names, err := b.List(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{second.Name}))
	file := filepath.Join(t.TempDir(), "fetched.db")
	g.Expect(b.Fetch(t.Context(), "clusters/ns/db/"+second.Name, file)).To(Succeed())
	st, err := etcdsnapshot.Verify(zap.NewNop())(file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Revision).To(Equal(second.Revision))
	g.Expect(st.Hash).To(Equal(second.Hash))

	fetchArgs := restoreFromBucket(t, c, second.Name)
	t.Logf("a 3-member cluster restored from %s serves every key", second.Location)
	expectFetchOfMissingKeyFails(t, fetchArgs)

	// Wrong keys: exit 1, nothing stored, a report naming the upload as the
	// step that failed.
	t.Setenv(EnvSecretAccessKey, "wrong")
	var stdout, stderr bytes.Buffer
	g.Expect(run(t.Context(), args, &stdout, &stderr)).To(Equal(1))
	var r backup.Report
	g.Expect(json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r)).To(Succeed())
	g.Expect(r.Succeeded).To(BeFalse())
	g.Expect(r.Message).To(HavePrefix("storing the snapshot: uploading to s3://backups/clusters/ns/db/"))
	g.Expect(r.Step).To(Equal(backup.StepStore), "the operator names spec.backup.destination.s3.endpoint for this step")
	names, err = b.List(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{second.Name}))
}

// runBackups runs the backup program n times with args, a second apart
// (backups are named to the second), and returns the reports it printed.
func runBackups(t *testing.T, args []string, n int) []backup.Report {
	t.Helper()
	g := NewWithT(t)
	var reports []backup.Report
	for range n {
		if len(reports) > 0 {
			nextSecond(t, reports[0].TakenAt) // backups are named to the second
		}
		var stdout, stderr bytes.Buffer
		g.Expect(run(t.Context(), args, &stdout, &stderr)).To(Equal(0), "backup %v:\n%s%s", args, stdout.String(), stderr.String())
		var r backup.Report
		g.Expect(json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r)).To(Succeed())
		reports = append(reports, r)
	}
	return reports
}

// restoreFromBucket plays the restore Job of a new cluster restored from
// key in c's bucket: its fetch container's arguments (this program), then
// etcdutl with the restore container's, into the data directories of a new
// 3-member cluster, which serves every key. It returns the fetch
// arguments (without "fetch"), the Job's work folder made a local one.
func restoreFromBucket(t *testing.T, c *dbv1.DatabaseCluster, key string) []string {
	t.Helper()
	g := NewWithT(t)
	restoredCluster := backupCluster()
	restoredCluster.Spec.Backup = nil
	restoredCluster.Spec.RestoreFrom = &dbv1.RestoreSource{S3: &dbv1.S3SnapshotSource{
		S3Bucket: *c.Spec.Backup.Destination.S3, Key: key,
	}}
	rjob := builders.RestoreJob(restoredCluster, 0, []string{"db-0"}, builders.Options{BackupImage: "x"})
	fetchArgs := rjob.Spec.Template.Spec.InitContainers[0].Args
	g.Expect(fetchArgs[0]).To(Equal("fetch"))
	scratch := t.TempDir()
	var local2 []string
	for _, a := range fetchArgs[1:] {
		local2 = append(local2, strings.ReplaceAll(a, builders.BackupWorkPath, scratch))
	}
	var fout bytes.Buffer
	g.Expect(run(t.Context(), append(append([]string{"fetch"}, local2...), "--termination-log="), &fout, &fout)).To(Equal(0), "fetch %v: %s", local2, fout.String())
	snapshotFile := filepath.Join(scratch, "snapshot.db")
	restoreCmd := rjob.Spec.Template.Spec.Containers[0]
	g.Expect(restoreCmd.Args[2]).To(Equal(builders.BackupWorkPath + "/snapshot.db"))
	etcdBin := etcdlocal.Binary(t)
	restored := etcdlocal.StartWith(t, etcdBin, 3, etcdlocal.Options{Prepare: func(m etcdlocal.Member) {
		g.Expect(os.Remove(m.DataDir)).To(Succeed(), "etcdutl creates the data directory itself")
		args := builders.RestoreArgs(snapshotFile, m.Name, m.InitialCluster, m.Token, m.PeerURL, m.DataDir)
		out, err := exec.CommandContext(t.Context(), filepath.Join(filepath.Dir(etcdBin), "etcdutl"), args...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "etcdutl %v:\n%s", args, out)
	}})
	for i := range restored.Size() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{restored.ClientURL(i)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.Get(t.Context(), "k", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
		_ = cli.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Count).To(BeNumerically(">=", 7), "member %s", restored.Name(i))
	}
	return local2
}

// expectFetchOfMissingKeyFails runs fetch with fetchArgs for a key that is
// not there: exit 1 and a termination message naming it.
func expectFetchOfMissingKeyFails(t *testing.T, fetchArgs []string) {
	t.Helper()
	g := NewWithT(t)
	bad := append([]string{"fetch"}, fetchArgs...)
	for i, a := range bad {
		if strings.HasPrefix(a, "--key=") {
			bad[i] = "--key=db-backup-19700101T000000Z.db"
		}
	}
	termination := filepath.Join(t.TempDir(), "termination")
	var fout bytes.Buffer
	g.Expect(run(t.Context(), append(bad, "--termination-log="+termination), &fout, &fout)).To(Equal(1))
	msg, err := os.ReadFile(termination)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(msg)).To(HavePrefix("downloading s3://backups/clusters/ns/db/db-backup-19700101T000000Z.db: "))
	t.Logf("a missing key fails the fetch with: %s", msg)
}

func backupCluster() *dbv1.DatabaseCluster {
	c := &dbv1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: dbv1.DatabaseClusterSpec{
			Replicas: ptr.To[int32](1), Image: "etcd",
			Backup: &dbv1.BackupSpec{Schedule: "@daily", Retention: dbv1.BackupRetention{Count: ptr.To[int32](1)},
				Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}}},
		},
	}
	return c
}

// etcdWithKeys starts a one-member etcd on loopback holding keys k0..k<n-1>,
// and returns it with a client to it (closed when the test ends).
func etcdWithKeys(t *testing.T, n int) (*etcdlocal.Cluster, *clientv3.Client) {
	t.Helper()
	local := etcdlocal.Start(t, etcdlocal.Binary(t), 1)
	raw, err := clientv3.New(clientv3.Config{Endpoints: local.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	for i := range n {
		if _, err := raw.Put(t.Context(), fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	return local, raw
}

// nextSecond waits until the clock is past the second of taken: backups are
// named to the second, so the next one gets a name of its own.
func nextSecond(t *testing.T, taken time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().UTC().Truncate(time.Second).After(taken), nil
	})
	if err != nil {
		t.Fatalf("the clock did not pass %s: %v", taken, err)
	}
}

// jobArgs are the CronJob container's arguments with the client Service's
// URL, the claim's mount point and the scratch directory made local.
func jobArgs(t *testing.T, c *dbv1.DatabaseCluster, clientURL, dir, work string) []string {
	t.Helper()
	ctr := builderContainer(c)
	var args []string
	for _, a := range ctr.Args {
		a = strings.ReplaceAll(a, "http://db-client.ns.svc.cluster.local:2379", clientURL)
		if dir != "" {
			a = strings.ReplaceAll(a, "/snapshots", dir)
		}
		args = append(args, strings.ReplaceAll(a, "/work", work))
	}
	return args
}
