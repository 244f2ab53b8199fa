package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process runs the operator on the host as a Deployment would run its pod:
// started again whenever it exits (killed by a fault or crashed), after a
// short back-off, with every start counted.
type process struct {
	name string
	args []string
	env  []string
	dir  string
	logs io.Writer
	logf func(format string, args ...any)

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	stopping bool
	done     chan struct{}
}

// resolveProgram makes a program path with a slash relative to dir.
func resolveProgram(prog, dir string) string {
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		return filepath.Join(dir, prog)
	}
	return prog
}

// start launches the process and the loop that restarts it.
func (p *process) start() error {
	p.done = make(chan struct{})
	if err := p.launch(); err != nil {
		return err
	}
	go p.supervise()
	return nil
}

func (p *process) launch() error {
	cmd := exec.Command(p.name, p.args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	// Its own process group, so that a kill reaches anything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the operator (%s): %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.starts++
	p.mu.Unlock()
	return nil
}

// supervise starts the process again after each exit until stop.
func (p *process) supervise() {
	defer close(p.done)
	backoff := 500 * time.Millisecond
	for {
		p.mu.Lock()
		exited, cmd := p.exited, p.cmd
		p.mu.Unlock()
		<-exited
		p.mu.Lock()
		stopping := p.stopping
		p.mu.Unlock()
		if stopping {
			return
		}
		p.logf("operator process %d exited (%v); starting it again in %s", cmd.Process.Pid, cmd.ProcessState, backoff)
		time.Sleep(backoff)
		for {
			err := p.launch()
			if err == nil {
				break
			}
			p.logf("%v; trying again", err)
			time.Sleep(2 * time.Second)
		}
	}
}

// restarts is how many times the process was started again.
func (p *process) restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts - 1
}

// pid identifies the running process.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// kill kills the running process (SIGKILL to its group, as a container
// runtime kills a container) and returns once it is gone; the supervisor
// starts it again.
func (p *process) kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing the operator process %d: %w", cmd.Process.Pid, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the operator process %d outlived SIGKILL by 10s", cmd.Process.Pid)
	}
}

// stop ends the process for good: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	<-p.done
}

// running waits until the process has been up for d without exiting, so
// that a program that dies at start is reported, not restarted forever.
func (p *process) running(ctx context.Context, d time.Duration) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return fmt.Errorf("the operator process exited within %s of its start (its log says why)", d)
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
