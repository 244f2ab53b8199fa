package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// A second run given the report folder a first one is writing is refused,
// with the first's pid; once the first is done, the folder is free again.
func TestReportFolderHeldByOneRun(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "report")
	unlock, err := lockReport(dir)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = lockReport(dir)
	g.Expect(err).To(MatchError(ContainSubstring("the report folder " + dir + " is in use by another gauntlet run (pid " + strconv.Itoa(os.Getpid()) + ")")))

	unlock()
	g.Expect(filepath.Join(dir, reportLockFile)).NotTo(BeAnExistingFile(), "nothing of the lock is left in the report")
	again, err := lockReport(dir)
	g.Expect(err).NotTo(HaveOccurred())
	again()
}

// A lock file a killed run left behind holds nothing: the kernel released
// its flock with the process.
func TestReportFolderLeftByAKilledRun(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, reportLockFile), []byte("999999\n"), 0o644)).To(Succeed())
	unlock, err := lockReport(dir)
	g.Expect(err).NotTo(HaveOccurred())
	unlock()
}
