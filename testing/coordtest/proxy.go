package coordtest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a userspace TCP proxy on 127.0.0.1 in front of a real server. A test
// points a client at Addr and then injects network faults: Blackhole (bytes vanish,
// connections stay open — the hang that timeouts must catch), Delay, Cut (every
// open connection reset) and Heal. Every fault is counted in Stats.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu        sync.Mutex
	blackhole bool
	delay     time.Duration
	conns     map[net.Conn]struct{}
	stats     ProxyStats
	closed    bool
}

// ProxyStats counts what the proxy did.
type ProxyStats struct {
	Accepted     int   // client connections accepted
	Cut          int   // connections closed by Cut
	Blackholes   int   // calls to Blackhole
	DroppedBytes int64 // bytes swallowed while blackholed
	Forwarded    int64 // bytes forwarded
}

// NewProxy listens on a free loopback port and forwards to target (host:port).
// It is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("coordtest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
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
// connections, without closing anything: peers see a silent network.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	p.stats.Blackholes++
}

// Delay holds every chunk of data for d before forwarding it (0 removes the delay).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Heal ends a blackhole and removes the delay.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole, p.delay = false, 0
}

// Cut closes every open connection; new connections are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
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
	for c := range p.conns {
		c.Close()
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
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.stats.Accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(server, client)
		go p.pump(client, server)
	}
}

// pump copies src to dst chunk by chunk, applying the current fault to each chunk.
// When either side fails it closes both.
func (p *Proxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hole, delay := p.blackhole, p.delay
			if hole {
				p.stats.DroppedBytes += int64(n)
			} else {
				p.stats.Forwarded += int64(n)
			}
			p.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay)
			}
			if !hole {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF, reset or closed by Cut/Close: both sides are closed
		}
	}
}
