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
// releases the folder.
func lockReport(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report folder: %w", err)
	}
	path := filepath.Join(dir, reportLockFile)
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
	_ = f.Truncate(0)
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	return func() {
		_ = os.Remove(path)
		_ = f.Close()
	}, nil
}
