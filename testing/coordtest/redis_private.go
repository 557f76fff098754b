package coordtest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server child process, without persistence, for
// tests that pause (SIGSTOP), kill or restart Redis.
type RedisServer struct {
	*Process
	// Addr is host:port on 127.0.0.1.
	Addr string
}

// PrivateRedis starts redis-server on a free port with no persistence, waits until
// it answers PING (at most 10 s) and kills it when the test ends.
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unreachable(t, "redis-server binary", "PATH", err)
	}
	port := FreePort(t)
	s := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.Process = StartProcess(t, "redis", bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	s.WaitReady(t, 10*time.Second)
	return s
}

// Client returns a client of the server, closed when the test ends.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// WaitReady waits until the server answers PING, or fails the test.
func (s *RedisServer) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordtest: private redis not ready: %v\n%s", err, s.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RestartEmpty kills the server and starts it again: without persistence it comes
// back empty, as a Redis failover to an unsynchronised replica would.
func (s *RedisServer) RestartEmpty(t testing.TB) {
	t.Helper()
	if err := s.Restart(); err != nil {
		t.Fatalf("coordtest: restart redis: %v", err)
	}
	s.WaitReady(t, 10*time.Second)
}
