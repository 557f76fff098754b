package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// obsLog is the observation log: lines buffered and flushed every 100 ms, so
// the parent can follow it while the scenario runs.
type obsLog struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	stop   chan struct{}
	done   chan struct{}
	closed bool // under mu: lines are dropped
}

func openLog(path string) (*obsLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	l := &obsLog{f: f, w: bufio.NewWriterSize(f, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.mu.Lock()
				_ = l.w.Flush()
				l.mu.Unlock()
			}
		}
	}()
	return l, nil
}

// line writes one line of space-separated fields.
func (l *obsLog) line(fields ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for i, f := range fields {
		if i > 0 {
			l.w.WriteByte(' ')
		}
		fmt.Fprint(l.w, f)
	}
	l.w.WriteByte('\n')
}

// state logs a state delivered to sub.
func (l *obsLog) state(sub string, rev int64, state string, changes []string) {
	ch := "-"
	if len(changes) > 0 {
		ch = strings.Join(changes, ",")
	}
	l.line("S", sub, time.Now().UnixNano(), rev, state, ch)
}

func (l *obsLog) errorf(format string, args ...any) {
	l.line("E", time.Now().UnixNano(), strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "))
}

func (l *obsLog) close() {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	_ = l.w.Flush()
	_ = l.f.Close()
}

// change is a cache's change as logged: key@modrev, with a ! for a delete.
func change(key string, modRev int64, deleted bool) string {
	s := fmt.Sprintf("%s@%d", key, modRev)
	if deleted {
		s += "!"
	}
	return s
}
