package cli_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
	"github.com/coordkit/coordkit/testing/coordtest"
)

var listening = regexp.MustCompile(`console listening" url=(\S+)`)

// TestServeCommand: `coordctl serve` refuses an unguarded non-loopback
// address, serves with a token read from --token-file, and stops cleanly when
// its context ends (SIGINT in main).
func TestServeCommand(t *testing.T) {
	e := testenv.New(t)
	r := newRunner(t, e)
	if _, errs, code := r.run("serve", "--listen", "0.0.0.0:0"); code != cli.ExitUsage || !strings.Contains(errs, "needs --token") {
		t.Fatalf("serve on 0.0.0.0 without a guard: exit %d %s", code, errs)
	}
	if _, errs, code := r.run("serve", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"); code != cli.ExitUsage {
		t.Fatalf("serve with a missing certificate: exit %d %s", code, errs)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-s3cret-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr coordtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile}, cli.IO{
			In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Getenv: func(k string) string { return r.env[k] }})
	}()
	var base string
	testenv.Wait(t, "coordctl serve to log its address", func() bool {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	req, _ := http.NewRequest(http.MethodGet, base+"/sagas", nil)
	req.Header.Set("Authorization", "Bearer s3cret-s3cret-s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sagas with the token from --token-file: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("serve exited %d after its context ended: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15s of its context ending")
	}
}

// TestServeRefusesEmptyAndShortTokens (issue 29, point 4): an empty
// --token-file turned authentication off (every page 200); an empty, short or
// duplicated token is now refused with exit 2 before anything listens.
func TestServeRefusesEmptyAndShortTokens(t *testing.T) {
	e := testenv.New(t)
	r := newRunner(t, e)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", file("empty", "\n")}, "is empty"},
		{[]string{"--token-file", file("short", "s3cret\n")}, "at least 16 bytes"},
		{[]string{"--token", ""}, "--token is empty"},
		{[]string{"--token", "s3cret"}, "at least 16 bytes"},
		{[]string{"--tokens-file", file("users-empty", "# nobody\n")}, "has no token"},
		{[]string{"--tokens-file", file("users-short", "alice s3cret\n")}, "at least 16 bytes"},
		{[]string{"--tokens-file", file("users-dup", "alice 0123456789abcdef0\nbob 0123456789abcdef0\n")}, "also another user's"},
		{[]string{"--proxy-header", "X-Forwarded-Email"}, "needs --trusted-proxy"},
	} {
		_, errs, code := r.run(append([]string{"serve", "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != cli.ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("serve %q: exit %d, stderr %q: want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}
