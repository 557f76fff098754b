package correctnesslease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

type runEvents struct {
	mu      sync.Mutex
	elected []coord.Token
	lost    []coord.LossReason
	ch      chan string
}

func newRunEvents() *runEvents { return &runEvents{ch: make(chan string, 16)} }

func (r *runEvents) opts() *RunOpts {
	return &RunOpts{
		Backoff: coord.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		OnElected: func(tok coord.Token) {
			r.mu.Lock()
			r.elected = append(r.elected, tok)
			r.mu.Unlock()
			r.ch <- "elected"
		},
		OnLost: func(tok coord.Token, reason coord.LossReason, err error) {
			r.mu.Lock()
			r.lost = append(r.lost, reason)
			r.mu.Unlock()
			r.ch <- "lost:" + string(reason)
		},
	}
}

func (r *runEvents) next(t *testing.T) string {
	t.Helper()
	return coordtest.Recv(t, r.ch, 15*time.Second, "a Run event")
}

// TestRunReelectsAfterLoss: the work runs with the token; when its key is
// deleted the work's context is cancelled, Run re-campaigns and the next term
// has a newer token; when the session steps down Run makes a new session.
func TestRunReelectsAfterLoss(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first clientv3.LeaseID
	var failFirst sync.Mutex
	failing := false
	ka := func(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
		failFirst.Lock()
		f := failing && id == first
		failFirst.Unlock()
		if f {
			return nil, errors.New("injected: unreachable")
		}
		return cli.KeepAliveOnce(ctx, id)
	}
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL, keepAliveOnce: ka})
	first = s.LeaseID()
	ev := newRunEvents()
	work := make(chan coord.Token, 8)
	causes := make(chan error, 8)
	runErr := make(chan error, 1)
	go func() {
		runErr <- Run(ctx, s, "leader", func(ctx context.Context, tok coord.Token) error {
			work <- tok
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		}, ev.opts())
	}()
	if e := ev.next(t); e != "elected" {
		t.Fatal(e)
	}
	tok1 := coordtest.Recv(t, work, 30*time.Second, "the first term starting")
	// nextTerm checks that the term of prev ended with reason, reported by Run,
	// and that Run was elected again, and returns the new term's token, newer than
	// prev.
	nextTerm := func(ending, starting string, reason coord.LossReason, prev coord.Token) coord.Token {
		t.Helper()
		if r := lossReason(coordtest.Recv(t, causes, 30*time.Second, ending)); r != reason {
			t.Fatalf("work cancelled with %v", r)
		}
		if e := ev.next(t); e != "lost:"+string(reason) {
			t.Fatal(e)
		}
		if e := ev.next(t); e != "elected" {
			t.Fatal(e)
		}
		tok := coordtest.Recv(t, work, 30*time.Second, starting)
		if c, _ := tok.Compare(prev); c != 1 {
			t.Fatalf("%s: token %s not newer than %s", starting, tok, prev)
		}
		return tok
	}

	// Term 1 ends: key deleted.
	if _, err := cli.Delete(ctx, s.keyFor(tok1.Lease())); err != nil {
		t.Fatal(err)
	}
	tok2 := nextTerm("the first term ending", "the second term starting", coord.LossKeyDeleted, tok1)

	// Term 2 ends: the session's keepalives fail; Run steps down and starts a
	// new session.
	failFirst.Lock()
	failing = true
	failFirst.Unlock()
	tok3 := nextTerm("the second term ending", "the third term starting", coord.LossRenewalDeadline, tok2)
	if s.Err() == nil {
		t.Fatal("first session still has authority")
	}

	// Cancelling Run's context ends the term and Run.
	cancel()
	if r := lossReason(coordtest.Recv(t, causes, 30*time.Second, "the third term ending")); r != coord.LossCancelled {
		t.Fatalf("work cancelled with %v", r)
	}
	if err := coordtest.Recv(t, runErr, 30*time.Second, "Run returning after cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	waitKeys(t, cli, tok3.Lease()+"/", 0)
}

// TestRunWorkDone: when the work returns while holding the lease, Run releases
// and returns the work's result.
func TestRunWorkDone(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	boom := errors.New("boom")
	var tok coord.Token
	err := Run(ctx, s, "once", func(ctx context.Context, tk coord.Token) error { tok = tk; return boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v", err)
	}
	waitKeys(t, cli, tok.Lease()+"/", 0)
	if err := Run(ctx, s, "once", func(context.Context, coord.Token) error { return nil }, nil); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestRunDrainExceeded: work that ignores its cancelled context makes Run return
// ErrDrainExceeded after the drain, instead of starting a second term; the error
// also carries the loss that ended the term (errors.As), so a caller can tell a
// step-down from a deleted key.
func TestRunDrainExceeded(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	release := make(chan struct{})
	defer close(release)
	started := make(chan coord.Token, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, s, "stubborn", func(_ context.Context, tok coord.Token) error {
			started <- tok
			<-release // ignores its context
			return nil
		}, &RunOpts{Drain: 200 * time.Millisecond})
	}()
	tok := coordtest.Recv(t, started, 30*time.Second, "the stubborn term starting")
	if _, err := cli.Delete(ctx, s.keyFor(tok.Lease())); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		var ae *coord.AuthorityLostError
		if !errors.Is(err, ErrDrainExceeded) || !errors.As(err, &ae) || ae.Reason != coord.LossKeyDeleted {
			t.Fatalf("Run = %v, want ErrDrainExceeded wrapping a LossKeyDeleted *coord.AuthorityLostError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
}
