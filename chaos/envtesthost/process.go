package envtesthost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
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

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	// quit is closed by stop: the supervisor starts nothing after it.
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

// start launches the process and the loop that restarts it.
func (p *process) start() error {
	if err := p.launch(); err != nil {
		return err
	}
	p.done, p.quit = make(chan struct{}), make(chan struct{})
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

// supervise starts the process again after each exit until stop. The
// back-off waits on quit too, so that a stop during it never meets a
// process started after it.
func (p *process) supervise() {
	defer close(p.done)
	const backoff, retry = 500 * time.Millisecond, 2 * time.Second
	for {
		p.mu.Lock()
		exited, cmd := p.exited, p.cmd
		p.mu.Unlock()
		select {
		case <-exited:
		case <-p.quit:
			return
		}
		p.logf("operator process %d exited (%v); starting it again in %s", cmd.Process.Pid, cmd.ProcessState, backoff)
		wait := backoff
		for {
			select {
			case <-p.quit:
				return
			case <-time.After(wait):
			}
			err := p.launch()
			if err == nil {
				break
			}
			p.logf("%v; trying again in %s", err, retry)
			wait = retry
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

// sigkillGrace is how long a killed process may take to be reaped: the
// kernel frees it at once, so a longer wait means it is stuck in the
// kernel (uninterruptible I/O), which no signal mends.
const sigkillGrace = 10 * time.Second

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
	case <-time.After(sigkillGrace):
		return fmt.Errorf("the operator process %d outlived SIGKILL by %s", cmd.Process.Pid, sigkillGrace)
	}
}

// stop ends the process for good: the supervisor first, so that it starts
// nothing more, then SIGTERM, and SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.quit == nil {
		return // never started
	}
	p.quitOnce.Do(func() { close(p.quit) })
	<-p.done
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
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
