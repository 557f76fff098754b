package console_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.9.9.9:1": true, "[::1]:8080": true, "localhost:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "example.com:80": false, "garbage": false,
	} {
		if got := console.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestNonLoopbackNeedsATokenOrMTLS: the console refuses to start unguarded on
// any address but loopback.
func TestNonLoopbackNeedsATokenOrMTLS(t *testing.T) {
	e := testenv.New(t)
	for _, listen := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if _, err := console.New(e.Admin, console.Config{Listen: listen}); !errors.Is(err, console.ErrUnguarded) {
			t.Errorf("New(%s, no token) = %v, want ErrUnguarded", listen, err)
		}
	}
	if _, err := console.New(e.Admin, console.Config{Listen: "0.0.0.0:0", Token: "s3cret-s3cret-s3cret"}); err != nil {
		t.Errorf("New(0.0.0.0 with a token) = %v", err)
	}
}

func client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t testing.TB, c *http.Client, u string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
		if k == "Host" {
			req.Host = v
		}
	}
	return do(t, c, req)
}

func post(t *testing.T, c *http.Client, u string, form url.Values, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return do(t, c, req)
}

// do sends req with c and returns the response with its body read.
func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
var versionField = regexp.MustCompile(`name="expect" value="([^"]+)"`)

// TestCSRFAndOrigin: a mutating form is refused without this browser's token,
// with another browser's token, and from another origin; nothing changes and
// no audit row is written. With the right token it applies.
func TestCSRFAndOrigin(t *testing.T) {
	e := testenv.Seeded(t)
	base := serve(t, e, console.Config{Actor: "carol@oncall (console)"})
	alice, mallory := client(t), client(t)
	_, page := get(t, alice, base+"/sagas/"+testenv.StuckSaga, nil)
	token, version := csrfField.FindStringSubmatch(page), versionField.FindStringSubmatch(page)
	if token == nil || version == nil {
		t.Fatalf("the saga page has no CSRF token or version:\n%s", page)
	}
	_, other := get(t, mallory, base+"/sagas/"+testenv.StuckSaga, nil)
	malloryToken := csrfField.FindStringSubmatch(other)[1]
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "expect": {version[1]}, "reason": {"r"}}
	}
	for name, c := range map[string]struct {
		cl   *http.Client
		form url.Values
		h    map[string]string
		want int
	}{
		"no token":             {alice, form(""), nil, http.StatusForbidden},
		"another browser's":    {alice, form(malloryToken), nil, http.StatusForbidden},
		"token without cookie": {http.DefaultClient, form(token[1]), nil, http.StatusForbidden},
		"cross-origin":         {alice, form(token[1]), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		resp, body := post(t, c.cl, base+"/sagas/"+testenv.StuckSaga+"/retry", c.form, c.h)
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, c.want, body)
		}
	}
	if n := auditCount(t, e, "saga.retry", testenv.StuckSaga, "applied"); n != 0 {
		t.Fatalf("a refused form wrote %d audit rows", n)
	}
	if resp, body := post(t, alice, base+"/sagas/"+testenv.StuckSaga+"/retry", url.Values{"csrf": {token[1]}, "expect": {version[1]}, "reason": {""}}, nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an empty reason: status %d: %s", resp.StatusCode, body)
	}
	resp, body := post(t, alice, base+"/sagas/"+testenv.StuckSaga+"/retry", url.Values{"csrf": {token[1]}, "expect": {version[1]}, "reason": {"provider is back"}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "applied") {
		t.Fatalf("with the token: status %d: %s", resp.StatusCode, body)
	}
	if n := auditCount(t, e, "saga.retry", testenv.StuckSaga, "applied"); n != 1 {
		t.Fatalf("audit rows after the accepted form: %d", n)
	}
	// Replaying the same form (the version is stale now) is a conflict.
	if resp, body := post(t, alice, base+"/sagas/"+testenv.StuckSaga+"/retry", url.Values{"csrf": {token[1]}, "expect": {version[1]}, "reason": {"again"}}, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a replayed form: status %d: %s", resp.StatusCode, body)
	}
}

// TestHostAndHeaders: a loopback console answers only to loopback Host names
// (a DNS-rebinding page gets nothing) and sends its security headers.
func TestHostAndHeaders(t *testing.T) {
	e := testenv.New(t)
	base := serve(t, e, console.Config{Actor: "carol"})
	resp, _ := get(t, client(t), base+"/", map[string]string{"Host": "evil.example:8080"})
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("foreign Host: status %d, want 421", resp.StatusCode)
	}
	resp, _ = get(t, client(t), base+"/", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("overview: %d", resp.StatusCode)
	}
	for h, want := range map[string]string{"Content-Security-Policy": "script-src 'self'", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if !strings.Contains(resp.Header.Get(h), want) {
			t.Errorf("%s = %q, want it to contain %q", h, resp.Header.Get(h), want)
		}
	}
	for _, c := range resp.Cookies() {
		if c.Name == "coordctl_csrf" && (!c.HttpOnly || c.SameSite != http.SameSiteStrictMode) {
			t.Errorf("CSRF cookie %+v: want HttpOnly, SameSite=Strict", c)
		}
	}
}

// TestMembersAndOwnershipPages: a filter naming a service or group without its
// tenant is a bad request; a group of more than 256 partitions lists only those
// not settled (here none), its map showing them all.
func TestMembersAndOwnershipPages(t *testing.T) {
	e := testenv.New(t)
	const p = 300
	e.Join(t, "big", p, "eu-west-1a")
	e.WaitSettled(t, "big", p, 1)
	base := serve(t, e, console.Config{Actor: "carol"})
	c := client(t)
	for _, u := range []string{"/members?service=checkout", "/ownership?group=big", "/members?tenant=a%2Fb", "/ownership?tenant=acme&group=a%2Fb"} {
		if resp, body := get(t, c, base+u, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `class="error"`) {
			t.Errorf("GET %s: status %d, want 400 with the error shown", u, resp.StatusCode)
		}
	}
	resp, body := get(t, c, base+"/ownership?tenant="+testenv.Tenant+"&group=big", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "the 300 settled ones are not listed") || !strings.Contains(body, "every partition is settled") ||
		strings.Count(body, `<span class="p c0"`) != p {
		t.Fatalf("ownership page of a settled group of %d: status %d, %d partitions on the map:\n%s", p, resp.StatusCode, strings.Count(body, `<span class="p c0"`), body)
	}
}

// TestTokenLogin: with a token, nothing but the login page and static assets
// is served until the token is presented (bearer header or the login form).
func TestTokenLogin(t *testing.T) {
	e := testenv.New(t)
	base := serve(t, e, console.Config{Actor: "carol", Token: "s3cret-token-s3cret-token"})
	c := client(t)
	if resp, _ := get(t, c, base+"/sagas", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("without the token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, c, base+"/live?path=/", map[string]string{"Accept": "text/event-stream"}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("live without the token: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, base+"/sagas", map[string]string{"Authorization": "Bearer s3cret-token-s3cret-token"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the bearer token: %d", resp.StatusCode)
	}
	_, page := get(t, c, base+"/login", nil)
	tok := csrfField.FindStringSubmatch(page)[1]
	if resp, _ := post(t, c, base+"/login", url.Values{"csrf": {tok}, "token": {"wrong"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	if resp, _ := post(t, c, base+"/login", url.Values{"csrf": {tok}, "token": {"s3cret-token-s3cret-token"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, base+"/sagas", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after login: %d", resp.StatusCode)
	}
}
