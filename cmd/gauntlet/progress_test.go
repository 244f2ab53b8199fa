package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// lockedBuffer is written by the progress ticker while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProgressSaysWhatItWaitsFor(t *testing.T) {
	g := NewWithT(t)
	out := &lockedBuffer{}
	p := newProgress(out)
	defer p.Close()
	now := time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC)
	p.mu.Lock()
	p.now = func() time.Time { return now }
	p.lastOut = now
	p.mu.Unlock()

	p.Phase("images")
	_, _ = fmt.Fprint(p, "17:00:00 building etcd ... ")
	g.Expect(out.String()).NotTo(ContainSubstring("building etcd"), "a partial line waits for its end")
	_, _ = fmt.Fprint(p, "done in 1s\n")
	g.Expect(out.String()).To(ContainSubstring("17:00:00 building etcd ... done in 1s\n"))

	started := now
	p.Waiting("the operator Deployment to be available", started, false)
	now = now.Add(10 * time.Second)
	p.mu.Lock()
	p.status()
	p.mu.Unlock()
	g.Expect(out.String()).NotTo(ContainSubstring("…"), "not quiet for long enough yet")

	now = now.Add(quietAfter)
	p.mu.Lock()
	p.status()
	p.mu.Unlock()
	g.Expect(out.String()).To(ContainSubstring("… images: 40s, waiting for the operator Deployment to be available (40s)"))

	p.Waiting("the operator Deployment to be available", started, true)
	now = now.Add(5 * time.Second)
	p.Done()
	g.Expect(out.String()).To(ContainSubstring("gauntlet: ✓ images in 45s"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	g.Expect(lines[0]).To(HaveSuffix("gauntlet: ▶ images"))
}
