package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture copies testdata/fixture (a module with the path of coordkit's, one
// package of each kind of name) to a temporary directory with an empty api/
// and CHANGELOG.md, and returns it.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/fixture")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "api/v0.1.0.txt", "")
	write(t, dir, "CHANGELOG.md", "# Changelog\n\n## Unreleased\n")
	return dir
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit replaces old with new in a fixture file, failing when old is absent.
func edit(t *testing.T, dir, name, old, new string) {
	t.Helper()
	text := read(t, dir, name)
	if !strings.Contains(text, old) {
		t.Fatalf("%s has no %q", name, old)
	}
	write(t, dir, name, strings.Replace(text, old, new, 1))
}

// gateRun runs the gate (check, or regenerate with w) and returns what it printed.
func gateRun(t *testing.T, dir string, w bool) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(dir, w, &out)
	if err != nil && !errors.Is(err, errGate) {
		t.Fatalf("run: %v (not a gate verdict)\n%s", err, out.String())
	}
	return out.String(), err
}

func mustPass(t *testing.T, dir string, w bool) {
	t.Helper()
	if out, err := gateRun(t, dir, w); err != nil {
		t.Fatalf("gate failed, want it to pass: %v\n%s", err, out)
	}
}

func mustFail(t *testing.T, dir string, w bool, want ...string) {
	t.Helper()
	out, err := gateRun(t, dir, w)
	if err == nil {
		t.Fatalf("gate passed, want it to fail with %q\n%s", want, out)
	}
	for _, s := range want {
		if !strings.Contains(out, s) {
			t.Errorf("gate output lacks %q:\n%s", s, out)
		}
	}
}

const lib = "pkg github.com/coordkit/coordkit/lib, "

// TestFeatures: one line per exported name, field, method (promoted ones and
// the receiver kind included) and interface method; parameter names dropped;
// internal and main packages left out.
func TestFeatures(t *testing.T) {
	dir := fixture(t)
	got, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`const DefaultTTL time.Duration = 15000000000`,
		`const Name untyped string = "lib"`,
		`func New[T comparable](string, ...Step[T]) (*Step[T], error)`,
		`func Old(context.Context) error`,
		`method (*Client) Acquire(context.Context, ...string) (*Lease, error)`,
		`method (*Step[T]) Run(context.Context) (T, error)`,
		`method (Client) Close() error`,
		`type Alias = Lease`,
		`type Client struct`,
		`type Client struct, embedded Config`,
		`type Config struct`,
		`type Config struct, OnLost func(context.Context, string) error`,
		`type Config struct, TTL time.Duration`,
		`type Lease struct`,
		`type Step[T any] struct`,
		`type Step[T any] struct, Data T`,
		`type Store interface { Get, unexported methods }`,
		`type Store interface, Get(context.Context, string) ([]byte, bool, error)`,
		`var ErrLost error`,
	}
	for i := range want {
		want[i] = lib + want[i]
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("features:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUnrecordedRemovalFails: a name removed from the code while the API file
// still lists it fails the check; regenerating records it in except.txt, and the
// check still fails until CHANGELOG.md names it under its package.
func TestUnrecordedRemovalFails(t *testing.T) {
	dir := fixture(t)
	mustPass(t, dir, true)
	mustPass(t, dir, false)

	edit(t, dir, "lib/lib.go", "func Old(ctx context.Context) error { return nil }", "")
	mustFail(t, dir, false, "removed or changed, still recorded in api/v0.1.0.txt", lib+"func Old(context.Context) error")

	mustFail(t, dir, true, "CHANGELOG.md does not mention Old under ### lib")
	if ex := read(t, dir, "api/except.txt"); !strings.Contains(ex, lib+"func Old(context.Context) error\n") {
		t.Fatalf("except.txt lacks the removed line:\n%s", ex)
	}
	if strings.Contains(read(t, dir, "api/v0.1.0.txt"), "func Old") {
		t.Fatal("the regenerated API file still lists Old")
	}
	// Mentioned under another package: not enough.
	write(t, dir, "CHANGELOG.md", "## Unreleased\n\n### other\n- Old removed.\n")
	mustFail(t, dir, false, "CHANGELOG.md does not mention Old under ### lib")

	write(t, dir, "CHANGELOG.md", "## Unreleased\n\n### other\n- x\n\n### lib\n- **Breaking:** `Old` removed: call `New`.\n")
	mustPass(t, dir, false)
}

// TestUnrecordedAdditionFails: a new exported name, method or field the file
// lacks fails the check, so the file stays exact.
func TestUnrecordedAdditionFails(t *testing.T) {
	dir := fixture(t)
	mustPass(t, dir, true)
	edit(t, dir, "lib/lib.go", "\tprivate int\n", "\tprivate int\n\tRetries int\n")
	mustFail(t, dir, false, "added, not recorded in api/v0.1.0.txt: "+lib+"type Config struct, Retries int")
	mustPass(t, dir, true) // an addition needs no changelog line to pass the gate
}

// TestChangedSignature: a changed signature is a removal and an addition; the
// changelog line may name the method or its type.
func TestChangedSignature(t *testing.T) {
	dir := fixture(t)
	mustPass(t, dir, true)
	edit(t, dir, "lib/lib.go", "Acquire(ctx context.Context, names ...string)", "Acquire(ctx context.Context, ttl time.Duration, names ...string)")
	mustFail(t, dir, false,
		"removed or changed, still recorded in api/v0.1.0.txt: "+lib+"method (*Client) Acquire(context.Context, ...string) (*Lease, error)",
		"added, not recorded in api/v0.1.0.txt: "+lib+"method (*Client) Acquire(context.Context, time.Duration, ...string) (*Lease, error)")
	mustFail(t, dir, true, "CHANGELOG.md does not mention Client.Acquire (or Client) under ### lib")
	write(t, dir, "CHANGELOG.md", "## Unreleased\n\n### `lib`\n- **Breaking:** `Client.Acquire` takes a TTL.\n")
	mustPass(t, dir, false)
}

// TestTypeRemovedWhole: naming a removed type covers its fields and methods.
func TestTypeRemovedWhole(t *testing.T) {
	dir := fixture(t)
	mustPass(t, dir, true)
	edit(t, dir, "lib/lib.go", "type Step[T any] struct{ Data T }", "type Stage[T any] struct{ Data T }")
	edit(t, dir, "lib/lib.go", "func (s *Step[T]) Run", "func (s *Stage[T]) Run")
	edit(t, dir, "lib/lib.go", "steps ...Step[T]) (*Step[T], error)", "steps ...Stage[T]) (*Stage[T], error)")
	mustFail(t, dir, true, "under ### lib")
	write(t, dir, "CHANGELOG.md", "## Unreleased\n\n### lib\n- **Breaking:** `Step` is `Stage`; `New` takes stages.\n")
	mustPass(t, dir, false)
}

// TestFrozenFile: once a release file is frozen (api/next.txt exists), its
// lines may leave the code only through except.txt, and additions go to next.txt.
func TestFrozenFile(t *testing.T) {
	dir := fixture(t)
	mustPass(t, dir, true)
	write(t, dir, "api/next.txt", "")
	mustPass(t, dir, false)

	edit(t, dir, "lib/lib.go", "func Old(ctx context.Context) error { return nil }", "func Newer() {}")
	mustFail(t, dir, false,
		"removed or changed, not recorded in api/except.txt: "+lib+"func Old(context.Context) error",
		"added, not recorded in api/next.txt: "+lib+"func Newer()")
	write(t, dir, "CHANGELOG.md", "## Unreleased\n\n### lib\n- **Breaking:** `Old` is gone.\n")
	mustPass(t, dir, true)
	if got := read(t, dir, "api/next.txt"); got != lib+"func Newer()\n" {
		t.Errorf("next.txt = %q", got)
	}
	if !strings.Contains(read(t, dir, "api/v0.1.0.txt"), "func Old") {
		t.Error("-w rewrote the frozen v0.1.0.txt")
	}
}

// TestHistory: a line a commit dropped from an API file by hand (not through
// -w) fails unless except.txt records it.
func TestHistory(t *testing.T) {
	f := &files{open: "v0.1.0.txt", frozen: map[string][]string{}}
	dropped := lib + "func Gone()"
	got := gate(nil, f, "", []string{dropped})
	if len(got) != 1 || !strings.Contains(got[0], "dropped from an API file by a commit, not recorded in api/except.txt: "+dropped) {
		t.Fatalf("gate = %q", got)
	}
	f.except = []string{dropped}
	if got := gate(nil, f, "### lib\n- `Gone` removed\n", []string{dropped}); len(got) != 0 {
		t.Fatalf("gate = %q, want nothing", got)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct{ line, kind, name, typ string }{
		{lib + "func New[T comparable](string) error", "func", "New", ""},
		{lib + "method (*Step[T]) Run(context.Context) (T, error)", "method", "Run", "Step"},
		{lib + "type Config struct, OnLost func(context.Context, string) error", "member", "OnLost", "Config"},
		{lib + "type Action[T any] func(ctx context.Context, data *T) error", "type", "Action", ""},
		{lib + "type Step[T any] struct, Data T", "member", "Data", "Step"},
		{lib + "type Client struct, embedded *pkg.Config", "member", "Config", "Client"},
		{lib + "type Store interface, Get(context.Context) error", "member", "Get", "Store"},
		{lib + "const Name untyped string = \"a, b\"", "const", "Name", ""},
	} {
		_, kind, name, typ := parse(c.line)
		if kind != c.kind || name != c.name || typ != c.typ {
			t.Errorf("parse(%q) = %s %s %s, want %s %s %s", c.line, kind, name, typ, c.kind, c.name, c.typ)
		}
	}
}

// TestDroppedLines: a commit that drops a line from an API file without adding
// it to except.txt (or another API file) in the same commit is found.
func TestDroppedLines(t *testing.T) {
	log := `commit c3
diff --git a/api/v0.1.0.txt b/api/v0.1.0.txt
--- a/api/v0.1.0.txt
+++ b/api/v0.1.0.txt
@@ -3 +2,0 @@
-pkg p, func ByHand()
commit c2
diff --git a/api/except.txt b/api/except.txt
--- a/api/except.txt
+++ b/api/except.txt
@@ -2,0 +3 @@
+pkg p, func Regenerated()
diff --git a/api/v0.1.0.txt b/api/v0.1.0.txt
--- a/api/v0.1.0.txt
+++ b/api/v0.1.0.txt
@@ -4 +3,0 @@
-pkg p, func Regenerated()
-pkg p, func Moved()
diff --git a/api/v0.2.0.txt b/api/v0.2.0.txt
--- /dev/null
+++ b/api/v0.2.0.txt
@@ -0,0 +1 @@
+pkg p, func Moved()
commit c1
diff --git a/api/except.txt b/api/except.txt
--- a/api/except.txt
+++ b/api/except.txt
@@ -3 +2,0 @@
-pkg p, func ReleaseEmptiedExcept()
`
	got := droppedLines(log)
	if strings.Join(got, "|") != "pkg p, func ByHand()" {
		t.Fatalf("droppedLines = %q, want only ByHand", got)
	}
}
