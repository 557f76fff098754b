package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coordkit/coordkit/coord"
)

// op is one write of the concurrent check, stamped with a global sequence when it
// started and when it returned, so "b returned before a started" is exact.
type op struct {
	tok        coord.Token
	value      string
	start, end int64
	err        error
}

func (o op) accepted() bool { return o.err == nil }

// checkConcurrent races writers that present a rising mix of tokens with stragglers
// from earlier leases, and a reader, then checks the history.
func checkConcurrent(ctx context.Context, k *kit, r Resource, name string) error {
	toks, err := k.tokens(ctx, name, k.cfg.Tokens)
	if err != nil {
		return err
	}
	var seq atomic.Int64
	ops := make([][]op, k.cfg.Writers)
	var wg sync.WaitGroup
	for w := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			n := k.cfg.WritesPerWriter
			for j := 0; j < n; j++ {
				i := j*len(toks)/n - rng.IntN(3) // rising, with stragglers up to two leases old
				i = max(i, 0)
				o := op{tok: toks[i], value: fmt.Sprintf("%d/%d/%d", toks[i].Revision(), w, j)}
				o.start = seq.Add(1)
				o.err = r.Write(ctx, o.tok, name, o.value)
				o.end = seq.Add(1)
				ops[w] = append(ops[w], o)
			}
		}()
	}
	readerDone := make(chan struct{})
	var reads []string
	var readErr error
	stop := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, ok, err := r.Read(ctx, name)
			if err != nil {
				readErr = err
				return
			}
			if ok {
				reads = append(reads, v)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readerDone
	if readErr != nil {
		return fmt.Errorf("fencetest: concurrent read: %w", readErr)
	}
	var all []op
	for _, w := range ops {
		all = append(all, w...)
	}
	final, ok, err := r.Read(ctx, name)
	if err != nil || !ok {
		return fmt.Errorf("fencetest: final read: %q, found %v, %v", final, ok, err)
	}
	return verifyHistory(all, reads, final)
}

// verifyHistory checks a concurrent history against the fencing contract.
func verifyHistory(all []op, reads []string, final string) error {
	accepted := map[string]op{}
	var top int64
	for _, o := range all {
		switch {
		case o.err == nil:
			accepted[o.value] = o
			top = max(top, o.tok.Revision())
		case !errors.Is(o.err, coord.ErrStaleToken):
			return fmt.Errorf("fencetest: write with %s failed: %v (want nil or coord.ErrStaleToken)", o.tok, o.err)
		}
	}
	var problems []string
	for _, a := range all {
		if a.accepted() {
			// No write may be accepted after a write with a newer token was.
			for _, b := range all {
				if b.accepted() && b.tok.Revision() > a.tok.Revision() && b.end < a.start {
					problems = append(problems, fmt.Sprintf("%s accepted after %s had been accepted (regression)", a.tok, b.tok))
					break
				}
			}
			continue
		}
		// A rejection needs a newer token accepted before the rejection returned.
		justified := false
		for _, b := range all {
			if b.accepted() && b.tok.Revision() > a.tok.Revision() && b.start < a.end {
				justified = true
				break
			}
		}
		if !justified {
			problems = append(problems, fmt.Sprintf("%s rejected although no newer token had been accepted", a.tok))
		}
	}
	var last int64
	for _, v := range reads {
		if _, ok := accepted[v]; !ok {
			problems = append(problems, fmt.Sprintf("read %q, a value whose write was not accepted", v))
			continue
		}
		rev := revisionOf(v)
		if rev < last {
			problems = append(problems, fmt.Sprintf("reads went back from revision %d to %d", last, rev))
		}
		last = max(last, rev)
	}
	if o, ok := accepted[final]; !ok || o.tok.Revision() != top {
		problems = append(problems, fmt.Sprintf("final value %q is not a write of the newest accepted token (revision %d)", final, top))
	}
	if len(problems) > 0 {
		seen := map[string]bool{}
		uniq := problems[:0]
		for _, p := range problems {
			if !seen[p] {
				seen[p] = true
				uniq = append(uniq, p)
			}
		}
		problems = uniq
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("… and %d more", len(problems)-10))
		}
		return fmt.Errorf("fencetest: concurrent writers (%d writes, %d reads): %s", len(all), len(reads), strings.Join(problems, "; "))
	}
	return nil
}

func revisionOf(v string) int64 {
	s, _, _ := strings.Cut(v, "/")
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
