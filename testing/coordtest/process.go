package coordtest

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a server or test worker running as a child process, with the faults a
// test injects into it: Pause (SIGSTOP), Resume (SIGCONT), Kill (SIGKILL) and
// Restart. Pauses and kills are counted so a fault test can prove its fault
// happened. Safe for concurrent use.
type Process struct {
	name  string
	path  string
	args  []string
	attr  *syscall.SysProcAttr
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	out   *Buffer
	mark  int // length of out when the current run started
	stats ProcessStats
}

// ProcessStats counts the faults injected into a Process.
type ProcessStats struct {
	Starts, Pauses, Resumes, Kills int
}

// StartProcess starts path with args and registers a cleanup that kills it. The
// process's stdout and stderr are kept (Output) and printed if the test fails.
func StartProcess(t testing.TB, name, path string, args ...string) *Process {
	t.Helper()
	p := &Process{name: name, path: path, args: args, out: &Buffer{}}
	if err := p.Start(); err != nil {
		t.Fatalf("coordtest: start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.Output())
		}
	})
	return p
}

// Start starts the process (again, after Kill).
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s already running", p.name)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = p.attr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mark = len(p.out.Bytes())
	p.stats.Starts++
	return nil
}

// Pid returns the process id, or 0 when not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Pause freezes the process with SIGSTOP, as a long GC pause or a VM stall would.
func (p *Process) Pause() error { return p.signal(syscall.SIGSTOP, &p.stats.Pauses) }

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT, &p.stats.Resumes) }

func (p *Process) signal(s syscall.Signal, count *int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s not running", p.name)
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		return err
	}
	*count++
	return nil
}

// Kill sends SIGKILL (to a paused process too) and waits for it to exit. Killing a
// process that is not running does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		p.stats.Kills++
	}
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Terminate sends SIGTERM and waits up to grace for exit, then kills.
func (p *Process) Terminate(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		p.mu.Lock()
		p.cmd = nil
		p.mu.Unlock()
	case <-time.After(grace):
		p.Kill()
	}
}

// Restart kills the process and starts it again with the same arguments.
func (p *Process) Restart() error {
	p.Kill()
	return p.Start()
}

// Exited returns a channel closed when the current run of the process exits.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// Stats returns the faults injected so far.
func (p *Process) Stats() ProcessStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Output returns everything the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// WaitOutput waits until the current run of the process has written substr, or
// fails the test.
func (p *Process) WaitOutput(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	if err := p.Printed(substr, timeout); err != nil {
		t.Fatalf("coordtest: %v", err)
	}
}

// Printed waits until the current run of the process has written substr and
// returns nil, or says why not: the process exited, or timeout passed. For a
// test that counts the runs that got there instead of failing on the first.
func (p *Process) Printed(substr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	mark := p.mark
	p.mu.Unlock()
	for !bytes.Contains(p.out.Bytes()[mark:], []byte(substr)) {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited before printing %q:\n%s", p.name, substr, p.Output())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not print %q within %v:\n%s", p.name, substr, timeout, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
