package coordtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanHelperEnv makes TestEtcdMembersExitWithTheTestBinary, re-run in a
// child test binary, the binary that starts a member and is killed.
const orphanHelperEnv = "COORDTEST_ORPHAN_HELPER"

// An etcd member outlives no test binary: when the binary that started it dies
// without its cleanups (SIGKILL here; a panic or a timeout alike), the member
// exits on its own. A crashed pgfence test binary once left 6 members running,
// holding their ports and CPU for the runs after it.
func TestEtcdMembersExitWithTheTestBinary(t *testing.T) {
	if os.Getenv(orphanHelperEnv) == "1" {
		c := EtcdCluster(t, 1, nil)
		fmt.Printf("MEMBER %d\n", c.Members[0].Pid())
		time.Sleep(time.Hour) // until the test kills this binary
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEtcdMembersExitWithTheTestBinary$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), orphanHelperEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	member := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var pid int
			if _, err := fmt.Sscanf(sc.Text(), "MEMBER %d", &pid); err == nil {
				member <- pid
			}
		}
		close(member)
	}()
	var pid int
	select {
	case pid = <-member:
	case <-time.After(2 * time.Minute):
	}
	if pid <= 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper test binary never started its etcd member (no MEMBER line within 2 min)")
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // whatever the outcome

	if !running(pid) {
		t.Fatalf("etcd member %d was not running before the helper was killed: nothing to prove", pid)
	}
	// The fault: the test binary killed, its cleanups never run.
	cmd.Process.Kill()
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper test binary ended with %v, want killed by SIGKILL", err)
	}
	for deadline := time.Now().Add(20 * time.Second); running(pid); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("etcd member %d still running 20 s after the test binary that started it was killed", pid)
		}
	}
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
