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

// A run that opened the lock file just before its holder released it
// (removed it) holds a file no longer at the path once it gets the flock:
// it must not count that as the folder's lock, or it and a third run that
// makes a new file would both hold "the" lock.
func TestReportLockOnARemovedFileClaimsNothing(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	unlock, err := lockReport(dir)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, reportLockFile)
	late, err := os.Open(path) // opened while the first run holds it
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = late.Close() }()
	unlock()

	third, err := lockReport(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer third()
	g.Expect(stillAt(late, path)).To(BeFalse(), "the late opener's file was removed: a lock on it is no lock on the folder")
	now, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = now.Close() }()
	g.Expect(stillAt(now, path)).To(BeTrue())
}
