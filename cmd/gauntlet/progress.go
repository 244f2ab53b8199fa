package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/term"
)

// quietAfter is how long a run may print nothing before progress says what
// it is still doing (when the output is not a terminal; a terminal gets a
// live status line instead).
const quietAfter = 30 * time.Second

// progress is what gauntlet prints while it works: the log lines of every
// step as they come, a line when a phase starts and ends (with how long it
// took), and, while nothing else is printed, what the current phase is
// waiting for and for how long: a status line redrawn every second on a
// terminal, or a line after every quietAfter of silence otherwise.
type progress struct {
	mu         sync.Mutex
	w          io.Writer
	tty        bool
	now        func() time.Time
	phase      string
	phaseStart time.Time
	lastOut    time.Time
	waits      []waitFor
	drawn      bool
	partial    []byte
	stop       chan struct{}
	stopped    sync.Once
}

type waitFor struct {
	what    string
	started time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, now: time.Now, stop: make(chan struct{})}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	p.lastOut = p.now()
	go p.tick()
	return p
}

func (p *progress) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.status()
			p.mu.Unlock()
		}
	}
}

// status draws (terminal) or prints (after a quiet spell) what is going on.
// The caller holds mu.
func (p *progress) status() {
	if p.phase == "" {
		return
	}
	now := p.now()
	line := fmt.Sprintf("… %s: %s", p.phase, now.Sub(p.phaseStart).Round(time.Second))
	if n := len(p.waits); n > 0 {
		w := p.waits[n-1]
		line += fmt.Sprintf(", waiting for %s (%s)", w.what, now.Sub(w.started).Round(time.Second))
	}
	switch {
	case p.tty:
		_, _ = fmt.Fprintf(p.w, "\r\033[2K%s", line)
		p.drawn = true
	case now.Sub(p.lastOut) >= quietAfter:
		_, _ = fmt.Fprintf(p.w, "%s %s\n", now.Format("15:04:05"), line)
		p.lastOut = now
	}
}

// clear removes the status line. The caller holds mu.
func (p *progress) clear() {
	if p.drawn {
		_, _ = fmt.Fprint(p.w, "\r\033[2K")
		p.drawn = false
	}
}

// Write takes log output: complete lines are printed above the status line.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.clear()
		_, _ = p.w.Write(p.partial[:i+1])
		p.partial = p.partial[i+1:]
		p.lastOut = p.now()
	}
	return len(b), nil
}

// Printf prints one line of gauntlet's own.
func (p *progress) Printf(format string, args ...any) {
	_, _ = fmt.Fprintf(p, "%s gauntlet: %s\n", p.now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Phase starts a phase.
func (p *progress) Phase(name string) {
	p.mu.Lock()
	p.phase, p.phaseStart = name, p.now()
	p.mu.Unlock()
	p.Printf("▶ %s", name)
}

// Done ends the current phase, printing how long it took.
func (p *progress) Done() {
	p.mu.Lock()
	name, took := p.phase, p.now().Sub(p.phaseStart)
	p.phase = ""
	p.mu.Unlock()
	if name != "" {
		p.Printf("✓ %s in %s", name, took.Round(100*time.Millisecond))
	}
}

// Waiting is a framework.WaitObserver: the status line names the newest
// wait still open.
func (p *progress) Waiting(what string, started time.Time, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !done {
		p.waits = append(p.waits, waitFor{what: what, started: started})
		return
	}
	for i := len(p.waits) - 1; i >= 0; i-- {
		if p.waits[i].what == what && p.waits[i].started.Equal(started) {
			p.waits = append(p.waits[:i], p.waits[i+1:]...)
			return
		}
	}
}

// Command runs a program in dir with its output shown as progress.
func (p *progress) Command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, p, p
	return cmd.Run()
}

// Clear removes the status line before other output.
func (p *progress) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// Close stops the status line.
func (p *progress) Close() {
	p.stopped.Do(func() { close(p.stop) })
	p.Clear()
}
