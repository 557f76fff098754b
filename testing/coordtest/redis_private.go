package coordtest

import (
	"context"
	"fmt"
	"os"
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
	bin, err := redisServerBin()
	if err != nil {
		missingBinary(t, err, "scripts/services.sh redis-bin (Debian's package redis-server)")
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

// redisServerBin finds redis-server: COORD_TEST_REDIS_SERVER, else PATH, else
// Debian's /usr/bin/redis-server (for a PATH without /usr/bin).
func redisServerBin() (string, error) {
	if p := os.Getenv("COORD_TEST_REDIS_SERVER"); p != "" {
		return exec.LookPath(p)
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", fmt.Errorf("redis-server is not on PATH, nor in /usr/bin, nor in COORD_TEST_REDIS_SERVER")
}
