package coordtest

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// chunkServer answers each line it reads with `chunks` writes of "x", spaced by
// gap (so the proxy reads them as separate chunks), then "\n".
func chunkServer(t *testing.T, chunks int, gap time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if buf[0] != '\n' {
						continue
					}
					for range chunks {
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
						time.Sleep(gap)
					}
					if _, err := c.Write([]byte("\n")); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// roundTrip sends one request line on c and reads the answer up to "\n".
func roundTrip(t *testing.T, c net.Conn, wait time.Duration) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, "q\n"); err != nil {
		return "", err
	}
	var got bytes.Buffer
	buf := make([]byte, 64)
	for !bytes.HasSuffix(got.Bytes(), []byte("\n")) {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String(), err
		}
	}
	return got.String(), nil
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitAccepted waits until the proxy has accepted n connections.
func waitAccepted(t *testing.T, p *Proxy, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Accepted < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("proxy accepted %d connections in 5s, want %d", p.Stats().Accepted, n)
		}
	}
}

func TestProxyBlackholeHealCut(t *testing.T) {
	p := NewProxy(t, chunkServer(t, 1, 0))
	c := dial(t, p)
	if got, err := roundTrip(t, c, 5*time.Second); err != nil || got != "x\n" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	p.Blackhole()
	if got, err := roundTrip(t, c, 300*time.Millisecond); err == nil {
		t.Fatalf("blackholed connection answered %q", got)
	}
	// Only the request crossed into the hole (the server never saw it): 2 bytes.
	if st := p.Stats(); st.Blackholes != 1 || st.DroppedBytes != 2 || st.Cut != 0 {
		t.Fatalf("blackhole counted %+v, want 1 blackhole, 2 bytes dropped, 0 cut", st)
	}
	p.Heal() // resets c, which lost its request
	c2 := dial(t, p)
	if got, err := roundTrip(t, c2, 5*time.Second); err != nil || got != "x\n" {
		t.Fatalf("after heal: %q %v", got, err)
	}
	p.Cut()
	if st := p.Stats(); st.Cut != 1 {
		t.Fatalf("one connection cut, counted %d", st.Cut)
	}
	if _, err := roundTrip(t, c2, 2*time.Second); err == nil {
		t.Fatal("a cut connection still answered")
	}
	c3 := dial(t, p)
	if got, err := roundTrip(t, c3, 5*time.Second); err != nil || got != "x\n" {
		t.Fatalf("after cut: %q %v", got, err)
	}
}

// TestProxyCountsEachCutOnce: a cut closes a client connection and its server
// side; that is one connection cut, and a Cut with nothing open counts nothing.
func TestProxyCountsEachCutOnce(t *testing.T) {
	p := NewProxy(t, chunkServer(t, 1, 0))
	for range 3 {
		dial(t, p)
	}
	waitAccepted(t, p, 3)
	p.Cut()
	if st := p.Stats(); st.Cut != 3 || st.Accepted != 3 {
		t.Fatalf("3 connections cut, counted %+v", st)
	}
	p.Cut()
	if st := p.Stats(); st.Cut != 3 {
		t.Fatalf("a Cut with no connection open counted: %+v", st)
	}
}

// TestProxyDelaysEachRoundTripOnce: a response written in 10 separate chunks is
// delayed once, by the configured round-trip delay, and counted as one delayed
// round trip. A per-chunk pause would take 10 delays.
func TestProxyDelaysEachRoundTripOnce(t *testing.T) {
	const chunks, gap, delay = 10, 10 * time.Millisecond, 400 * time.Millisecond
	p := NewProxy(t, chunkServer(t, chunks, gap))
	c := dial(t, p)
	if _, err := roundTrip(t, c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.DelayedRoundTrips != 0 {
		t.Fatalf("round trip without a delay counted as delayed: %+v", st)
	}
	p.Delay(delay)
	const trips = 3
	for i := range trips {
		start := time.Now()
		got, err := roundTrip(t, c, 10*time.Second)
		took := time.Since(start)
		if err != nil || got != strings.Repeat("x", chunks)+"\n" {
			t.Fatalf("round trip %d: %q %v", i, got, err)
		}
		// At least the delay; far less than a delay per chunk (10 × 400 ms): the
		// bound leaves a loaded machine more than a second of scheduling slack.
		if took < delay || took > delay+chunks*gap+1200*time.Millisecond {
			t.Fatalf("round trip %d of %d chunks took %v with a %v round-trip delay", i, chunks, took, delay)
		}
	}
	if st := p.Stats(); st.DelayedRoundTrips != trips {
		t.Fatalf("%d delayed round trips counted, want %d: %+v", st.DelayedRoundTrips, trips, st)
	}
	p.Heal()
	if _, err := roundTrip(t, c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.DelayedRoundTrips != trips {
		t.Fatalf("round trip after Heal counted as delayed: %+v", st)
	}
}

// TestProxyBlackholeSwallowsHeldBytes: bytes held by a Delay when a blackhole
// begins never arrive, and are counted as dropped.
func TestProxyBlackholeSwallowsHeldBytes(t *testing.T) {
	p := NewProxy(t, chunkServer(t, 1, 0))
	c := dial(t, p)
	if _, err := roundTrip(t, c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Delay(2 * time.Second) // the request is held 1 s on its way in
	c.SetDeadline(time.Now().Add(1500 * time.Millisecond))
	if _, err := io.WriteString(c, "q\n"); err != nil {
		t.Fatal(err)
	}
	// On a loaded machine the proxy may read it only after the blackhole began
	// (dropped on arrival): the count is the same, the path through the delay not.
	time.Sleep(100 * time.Millisecond)
	p.Blackhole()
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Fatalf("held request answered through a blackhole: %d bytes", n)
	}
	if st := p.Stats(); st.DroppedBytes != 2 || st.Forwarded != 4 {
		t.Fatalf("held request not counted as dropped: %+v", st)
	}
}

// TestProxyHealResetsConnectionsThatLostBytes: TCP never delivers a stream with a
// hole in it, so a connection that lost bytes to a blackhole is reset when the
// network heals (its peers reconnect), while one that lost nothing carries on.
// Before, the lossy connection went on forwarding after the hole: an HTTP/2 peer
// then read garbage frames — every request refused with PROTOCOL_ERROR, or a
// reader waiting for the rest of a frame that never comes.
func TestProxyHealResetsConnectionsThatLostBytes(t *testing.T) {
	p := NewProxy(t, chunkServer(t, 1, 0))
	lossy, quiet := dial(t, p), dial(t, p)
	for _, c := range []net.Conn{lossy, quiet} {
		if got, err := roundTrip(t, c, 5*time.Second); err != nil || got != "x\n" {
			t.Fatalf("through the proxy: %q %v", got, err)
		}
	}
	p.Blackhole()
	if got, err := roundTrip(t, lossy, 300*time.Millisecond); err == nil {
		t.Fatalf("blackholed connection answered %q", got)
	}
	p.Heal()
	if got, err := roundTrip(t, lossy, 5*time.Second); err == nil {
		t.Fatalf("a connection that lost bytes answered %q after Heal: its stream has a hole", got)
	}
	if got, err := roundTrip(t, quiet, 5*time.Second); err != nil || got != "x\n" {
		t.Fatalf("a connection that lost nothing, after Heal: %q %v", got, err)
	}
	if st := p.Stats(); st.ResetAtHeal != 1 || st.DroppedBytes != 2 || st.Cut != 0 {
		t.Fatalf("counted %+v, want 1 connection reset at heal, 2 bytes dropped, 0 cut", st)
	}
}
