// Package orphan ends a test's helper process (an etcd member, a grpc-proxy)
// once the test binary that started it is gone. A test binary that dies
// without its cleanups — a panic, a timeout, SIGKILL — would otherwise leave
// its children running, holding ports and CPU for the runs after it.
package orphan

import (
	"fmt"
	"os"
	"time"
)

// checkEvery is how often the parent is looked at.
const checkEvery = 250 * time.Millisecond

// ExitWithParent watches, in a goroutine, whether this process still has the
// parent it has now; once it does not (the parent died and the process was
// re-parented to init or a subreaper), it says so on stderr and exits with
// status 3. It does nothing for a process whose parent is init already.
// Polling the parent id needs no signal set up per OS thread, unlike Linux's
// parent-death signal, which fires when the *thread* that started the child
// ends, something a Go program does not control.
func ExitWithParent() {
	parent := os.Getppid()
	if parent <= 1 {
		return
	}
	go func() {
		for {
			time.Sleep(checkEvery)
			if os.Getppid() != parent {
				fmt.Fprintf(os.Stderr, "%s: the process that started it (pid %d) is gone; exiting\n", os.Args[0], parent)
				os.Exit(3)
			}
		}
	}()
}
