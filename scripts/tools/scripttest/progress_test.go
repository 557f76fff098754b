package scripttest

import (
	"bufio"
	"os/exec"
	"testing"
	"time"
)

// TestWhileRunningLeavesNoLongSilence: two commands run one after the other
// through while_running (as scripts/test.sh runs go vet module by module) never
// leave the terminal silent much longer than the progress interval. Before, each
// command's first line came a whole interval after it started and nothing said
// when one ended, so a command ending just before its next line and the next
// one's first line left almost two intervals of silence (go vet of cmd/coordvet:
// 45 s, where the README promises a line every 25 s). This failed on the old
// while_running (3.5 s of silence for a 2 s interval).
func TestWhileRunningLeavesNoLongSilence(t *testing.T) {
	const every = 2 * time.Second
	// A small directory to measure: each line reports its size, and du of a
	// big one (/tmp held 1 GB of build output in CI) took over a second on a
	// loaded machine, which is what delayed the first line, not the printer.
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", `. ../../lib/progress.sh
while_running "first" "$DIR" sleep 3.5
while_running "second" "$DIR" sleep 3.5`)
	cmd.Env = append(cmd.Environ(), "PROGRESS_EVERY=2", "DIR="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	last, longest := start, time.Duration(0)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		now := time.Now()
		t.Logf("%5.1fs %s", now.Sub(start).Seconds(), sc.Text())
		longest = max(longest, now.Sub(last))
		last = now
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	longest = max(longest, time.Since(last))
	if slack := every / 2; longest > every+slack {
		t.Fatalf("the longest silence was %v; want at most the interval %v (+%v)", longest.Round(100*time.Millisecond), every, slack)
	}
}
