package coordtest

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// ProcessState returns 'T' when every thread of process pid is stopped (SIGSTOP
// is asynchronous: a process is frozen only once all its threads are), else the
// state letter (from /proc/<pid>/task/*/stat) of a thread that is not. Linux only.
func ProcessState(pid int) (byte, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("malformed /proc stat %q", b)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return st, nil
		}
	}
	return 'T', nil
}

// WaitStopped waits until every thread of process pid is stopped, failing the
// test after timeout.
func WaitStopped(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := ProcessState(pid)
		if err != nil {
			t.Fatalf("coordtest: state of process %d: %v", pid, err)
		}
		if st == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordtest: process %d not stopped after %v (a thread is in state %q)", pid, timeout, st)
		}
		time.Sleep(time.Millisecond)
	}
}
