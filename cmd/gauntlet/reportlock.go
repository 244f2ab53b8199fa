package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reportLockFile is held, with an exclusive flock, by the run that writes
// a report folder. The kernel releases it when the process ends, however
// it ends, so a crashed run leaves nothing to clean up.
const reportLockFile = ".gauntlet-run.lock"

// lockReport claims the report folder dir for this run, making it if
// needed: two runs given the same --report would write one log, one
// report.json and one evidence tree over each other. The returned func
// releases the folder and removes the lock file.
func lockReport(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report folder: %w", err)
	}
	path := filepath.Join(dir, reportLockFile)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("report folder: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder, _ := os.ReadFile(path)
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("the report folder %s is in use by another gauntlet run (pid %s): give each run its own --report",
					dir, strings.TrimSpace(string(holder)))
			}
			return nil, fmt.Errorf("report folder %s: locking it: %w", dir, err)
		}
		// The run that held the lock removes the file as it releases it;
		// a file opened before that removal and locked after it is no
		// longer the one at path, and a lock on it claims nothing.
		if !stillAt(f, path) {
			_ = f.Close()
			continue
		}
		_ = f.Truncate(0)
		_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		return func() {
			_ = os.Remove(path) // while locked: see stillAt
			_ = f.Close()
		}, nil
	}
}

// stillAt is whether the open file f is the file now at path.
func stillAt(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}
