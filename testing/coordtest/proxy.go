package coordtest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a userspace TCP proxy on 127.0.0.1 in front of a real server. A test
// points a client at Addr and then injects network faults: Blackhole (bytes vanish,
// connections stay open — the hang that timeouts must catch), Delay (every round
// trip takes longer), Cut (every open connection reset) and Heal. Every fault is
// counted in Stats where it takes effect, so a test can prove it happened.
//
// Like TCP, the proxy never delivers a stream with a hole in it: Heal resets each
// connection that lost bytes to the blackhole (its peers see it die, as after a
// partition that outlasted their retransmissions, and reconnect); a connection
// that lost nothing carries on.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu        sync.Mutex
	blackhole bool
	delay     time.Duration
	links     map[*link]struct{}
	stats     ProxyStats
	closed    bool
}

// ProxyStats counts what the proxy did. Each count is of an effect, not of a call:
// a Cut that finds no connection counts nothing, a Delay that no data crosses
// delays no round trip.
type ProxyStats struct {
	Accepted     int   // client connections accepted (and dialled through to the target)
	Cut          int   // connections closed by Cut (a client connection and its server side count once)
	Blackholes   int   // calls to Blackhole
	DroppedBytes int64 // bytes swallowed while blackholed, either direction
	// DelayedRoundTrips counts round trips that crossed the proxy while a Delay was
	// set: server data (a response) that followed client data (a request) and was
	// held. A response of many chunks is one round trip.
	DelayedRoundTrips int
	Forwarded         int64 // bytes forwarded, either direction
	ResetAtHeal       int   // connections Heal closed because they had lost bytes
}

// link is one proxied connection: the client's side and the server's side.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	awaiting       bool // client data was forwarded since the last server data
	lost           bool // bytes were dropped (guarded by the Proxy's mu)
}

func (l *link) close() {
	l.client.Close()
	l.server.Close()
}

// NewProxy listens on a free loopback port and forwards to target (host:port).
// It is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("coordtest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns "http://" + Addr, the form etcd endpoints take.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Blackhole makes the proxy swallow every byte in both directions, on open and new
// connections, without closing anything: peers see a silent network. Bytes still
// held by a Delay when it starts are swallowed too.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	p.stats.Blackholes++
}

// Delay makes every round trip through the proxy d longer (0 removes the delay):
// bytes in each direction are held d/2 from the moment the proxy reads them. It is
// a latency, not a pause per chunk — bytes that arrive together leave together, so
// a request or response of many chunks is delayed once. Bytes already read keep
// the delay they were read with.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Heal ends a blackhole and removes the delay. Connections that lost bytes to the
// blackhole are closed (counted in ResetAtHeal): their streams have a hole.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole, p.delay = false, 0
	for l := range p.links {
		if l.lost {
			l.close()
			delete(p.links, l)
			p.stats.ResetAtHeal++
		}
	}
}

// Cut closes every open connection; new connections are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.close()
		delete(p.links, l)
		p.stats.Cut++
	}
}

// Stats returns the counts so far.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy, closes every connection and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		l.close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.links[l] = struct{}{}
		p.stats.Accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(l, true)
		go p.pump(l, false)
	}
}

// chunk is data read from one side, due at the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pump copies one direction of l (the client's requests when request is true, the
// server's responses otherwise): a reader stamps each chunk with its due time and
// a writer delivers it then, so a delay is a latency and never accumulates. When
// either side fails it closes both.
func (p *Proxy) pump(l *link, request bool) {
	defer p.wg.Done()
	src, dst := l.server, l.client
	if request {
		src, dst = l.client, l.server
	}
	queue := make(chan chunk, 64)
	writerDone := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(writerDone)
		defer l.close()
		for c := range queue {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			if !p.forward(l, c.data) {
				continue
			}
			if _, err := dst.Write(c.data); err != nil {
				return
			}
		}
	}()
	defer func() {
		close(queue)
		l.close()
		<-writerDone
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			now := time.Now()
			p.mu.Lock()
			hole, delay := p.blackhole, p.delay
			if hole {
				p.stats.DroppedBytes += int64(n)
				l.lost = true
			}
			p.mu.Unlock()
			if !hole {
				if p.turn(l, request) && delay > 0 {
					p.mu.Lock()
					p.stats.DelayedRoundTrips++
					p.mu.Unlock()
				}
				select {
				case queue <- chunk{data: append([]byte(nil), buf[:n]...), due: now.Add(delay / 2)}:
				case <-writerDone:
					return
				}
			}
		}
		if err != nil {
			return // EOF, reset or closed by Cut/Close: both sides are closed
		}
	}
}

// turn records data in one direction of l and reports whether it is a response
// following a request: the end of a round trip.
func (p *Proxy) turn(l *link, request bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if request {
		l.awaiting = true
		return false
	}
	was := l.awaiting
	l.awaiting = false
	return was
}

// forward counts data about to be written, or drops it when a blackhole began
// while it was held; it reports whether to write it.
func (p *Proxy) forward(l *link, data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole {
		p.stats.DroppedBytes += int64(len(data))
		l.lost = true
		return false
	}
	p.stats.Forwarded += int64(len(data))
	return true
}
