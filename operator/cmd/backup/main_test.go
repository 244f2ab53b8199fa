package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup/etcdsnapshot"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

// TestBackupJobAgainstRealEtcd runs the backup program with exactly the
// arguments the CronJob's container gets (the client Service's URL and the
// mount points are the only substitutions) against a real etcd on loopback,
// twice a second apart with a retention of one: the first backup is stored
// and verified, the second replaces it, the final snapshot beside them
// stays, and the stored file verifies again with etcdutl's code.
func TestBackupJobAgainstRealEtcd(t *testing.T) {
	g := NewWithT(t)
	local, raw := etcdWithKeys(t, 5)

	c := backupCluster()
	dir, work := t.TempDir(), t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "db-20261101T000000Z.db"), []byte("final"), 0o600)).To(Succeed())
	termination := filepath.Join(t.TempDir(), "termination-log")
	g.Expect(builderContainer(c).Command).To(Equal([]string{builders.BackupCommand}))
	args := append(jobArgs(t, c, local.ClientURL(0), dir, work), "--termination-log="+termination)

	backupOnce := func() backup.Report {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		g.Expect(code).To(Equal(0), "backup %v:\n%s%s", args, stdout.String(), stderr.String())
		var r backup.Report
		msg, err := os.ReadFile(termination)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal(msg, &r)).To(Succeed())
		g.Expect(strings.TrimSpace(stdout.String())).To(Equal(string(msg)))
		return r
	}
	first := backupOnce()
	g.Expect(first.Succeeded).To(BeTrue())
	g.Expect(first.TotalKeys).To(BeNumerically(">=", 5))
	g.Expect(first.Revision).To(BeNumerically(">=", 6))
	g.Expect(first.Location).To(Equal("pvc/db-snapshots/" + first.Name))
	t.Logf("first backup %s: revision %d, %d keys, %d bytes, hash %d", first.Name, first.Revision, first.TotalKeys, first.SizeBytes, first.Hash)

	nextSecond(t, first.TakenAt) // backups are named to the second
	_, err := raw.Put(t.Context(), "k5", "v")
	g.Expect(err).NotTo(HaveOccurred())
	second := backupOnce()
	g.Expect(second.Revision).To(BeNumerically(">", first.Revision))
	g.Expect(second.Deleted).To(Equal([]string{first.Name}), "a retention of one keeps only the newest")

	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf(second.Name, "db-20261101T000000Z.db"))
	st, err := etcdsnapshot.Verify(zap.NewNop())(filepath.Join(dir, second.Name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Revision).To(Equal(second.Revision))
	g.Expect(st.Hash).To(Equal(second.Hash))

	// No member answers: exit 1, a report that says why, nothing stored.
	bad := append([]string{}, args...)
	for i, a := range bad {
		if strings.HasPrefix(a, "--endpoints=") {
			bad[i] = "--endpoints=http://127.0.0.1:1"
		}
	}
	bad = append(bad, "--dial-timeout=500ms")
	var stdout, stderr bytes.Buffer
	g.Expect(run(t.Context(), bad, &stdout, &stderr)).To(Equal(1))
	var r backup.Report
	g.Expect(json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r)).To(Succeed())
	g.Expect(r.Succeeded).To(BeFalse())
	g.Expect(r.Message).To(HavePrefix("saving the snapshot: no endpoint gave a snapshot"))
	entries, _ = os.ReadDir(dir)
	g.Expect(entries).To(HaveLen(2))
}

func TestFlags(t *testing.T) {
	g := NewWithT(t)
	g.Expect([]string{EnvAccessKeyID, EnvSecretAccessKey}).To(Equal([]string{builders.EnvS3AccessKeyID, builders.EnvS3SecretAccessKey}),
		"the CronJob sets the variables the program reads")
	var stdout, stderr bytes.Buffer
	g.Expect(run(t.Context(), []string{"--cluster=db", "--endpoints=http://x", "--dir=/d", "--claim=c"}, &stdout, &stderr)).To(Equal(2))
	g.Expect(stderr.String()).To(ContainSubstring("a retention is required"))
	stderr.Reset()
	g.Expect(run(t.Context(), []string{"--endpoints=http://x"}, &stdout, &stderr)).To(Equal(2))
	g.Expect(stderr.String()).To(ContainSubstring("--cluster is required"))
}

func TestEncodeReportFitsATerminationMessage(t *testing.T) {
	g := NewWithT(t)
	r := backup.Report{Succeeded: true, Name: "db-backup-20261124T030000Z.db"}
	for i := range 500 {
		r.Deleted = append(r.Deleted, fmt.Sprintf("db-backup-2026%04dT000000Z.db", i))
	}
	out := encodeReport(r)
	g.Expect(len(out)).To(BeNumerically("<=", maxReport))
	var back backup.Report
	g.Expect(json.Unmarshal(out, &back)).To(Succeed())
	g.Expect(back.Deleted).NotTo(BeEmpty())
	g.Expect(back.Deleted[len(back.Deleted)-1]).To(Equal(r.Deleted[len(r.Deleted)-1]))
	g.Expect(back.Message).To(ContainSubstring("more backups than the report lists"))
}

// builderContainer is the backup CronJob's container as the operator builds it.
func builderContainer(c *dbv1.DatabaseCluster) corev1.Container {
	ctr := builders.BackupCronJob(c, builders.Options{BackupImage: "x"}).Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	return corev1.Container{Command: ctr.Command, Args: ctr.Args}
}
