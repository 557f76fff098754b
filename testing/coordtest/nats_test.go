package coordtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCheckJetStream: the check NATSURL makes tells a NATS server with JetStream
// from one without it (the packaged nats-server's default), and from a port where
// nothing speaks NATS — each against a real nats-server started here.
func TestCheckJetStream(t *testing.T) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server" // Debian's package puts it outside a user's PATH
	}
	if _, err := os.Stat(bin); err != nil {
		missingBinary(t, fmt.Errorf("nats-server is not on PATH, nor in /usr/sbin"), "scripts/services.sh nats-bin (Debian's package nats-server)")
	}
	start := func(args ...string) string {
		port := FreePort(t)
		p := StartProcess(t, "nats-server", bin, append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
		p.WaitOutput(t, "Server is ready", 10*time.Second)
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	withJS := start("-js", "-sd", t.TempDir())
	withoutJS := start()

	if err := checkJetStream(withJS, 5*time.Second); err != nil {
		t.Errorf("server started with -js: %v", err)
	}
	if err := checkJetStream(withoutJS, 5*time.Second); !errors.Is(err, errNoJetStream) {
		t.Errorf("server without JetStream: got %v, want errNoJetStream", err)
	}
	// NATSURL itself refuses the server without JetStream, saying so (it only
	// checked that the port accepted TCP before).
	t.Setenv("COORD_TEST_NATS_URL", "nats://"+withoutJS)
	if msg := fatalOf(func(tb testing.TB) { NATSURL(tb) }); !strings.Contains(msg, "JetStream is not enabled") {
		t.Errorf("NATSURL on a server without JetStream: got failure %q, want one saying JetStream is not enabled", msg)
	}
	t.Setenv("COORD_TEST_NATS_URL", "nats://"+withJS)
	if msg := fatalOf(func(tb testing.TB) { NATSURL(tb) }); msg != "" {
		t.Errorf("NATSURL on a server with JetStream failed: %s", msg)
	}

	redis := PrivateRedis(t) // something that listens but is not NATS
	if err := checkJetStream(redis.Addr, 2*time.Second); err == nil || errors.Is(err, errNoJetStream) {
		t.Errorf("redis port: got %v, want a not-NATS error", err)
	}
}

// fatalTB records the message of the Fatalf that ends a helper.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a testing.TB whose Fatalf ends fn, and returns the message
// ("" when fn returned without failing).
func fatalOf(fn func(testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}
