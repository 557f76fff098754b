// Command gotestprogress passes `go test` output through unchanged and adds what a
// person watching a long run needs: whenever nothing has been printed for a while,
// a line saying how far the run is, which test binaries are running and for how
// long, or that the go command is still compiling; and at the end a closing count
//
//	packages: 38 passed, 0 failed
//
// and, with -recap FILE, each failed test's first and last lines (and the last it logged itself) written to FILE
// (for the end of a CI log, which is what a truncated log keeps).
//
// It exits 1 when a package failed, or when no package passed at all.
//
//	go test ./... 2>&1 | gotestprogress -packages 41 -cache "$(go env GOCACHE)"
//	gotestprogress -packages 56 <(cd a && go test ./... 2>&1) <(cd b && go test ./... 2>&1)
//
// It reads plain output, not `go test -json`: with -json the testing package
// replaces os.Stderr inside m.Run, a data race with any server a TestMain started
// before it. The processes it reports are the descendants of its parent (the shell
// running the pipeline), read from /proc. Standard library only.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// result matches go test's line for one package: "ok  \tpkg\t1.2s",
// "FAIL\tpkg\t3.4s", "FAIL\tpkg [build failed]", "?   \tpkg\t[no test files]".
var result = regexp.MustCompile(`^(ok|FAIL|\?)\s+(\S+)(\s|$)`)

type printer struct {
	mu       sync.Mutex
	out      io.Writer
	start    time.Time
	lastLine time.Time
	total    int // packages expected, 0 if unknown
	passed   int
	failed   []string
	noTests  int
	cacheDir string
	cache0   int64
	procs    func() []proc // what is running now
	fails    []*failBlock  // each failed test's output, abridged
	recap    string        // the file the failed tests' recap goes to, if set
}

func main() {
	total := flag.Int("packages", 0, "number of packages expected (for the progress lines)")
	quiet := flag.Duration("quiet", 25*time.Second, "print a progress line after this long without output")
	cache := flag.String("cache", "", "the build cache directory, whose growth the progress lines report")
	recap := flag.String("recap", "", "a file to write, when a test failed, each failed test's first and last lines to")
	flag.Parse()
	p := newPrinter(os.Stdout, *total, *cache)
	p.recap = *recap
	parent := os.Getppid()
	p.procs = func() []proc { return descendants(parent, os.Getpid()) }
	stop := make(chan struct{})
	go p.heartbeat(*quiet, stop)
	err := p.readAll(flag.Args())
	close(stop)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gotestprogress: %v\n", err)
		os.Exit(1)
	}
	if !p.summary() {
		os.Exit(1)
	}
}

func newPrinter(out io.Writer, total int, cacheDir string) *printer {
	now := time.Now()
	return &printer{out: out, start: now, lastLine: now, total: total,
		cacheDir: cacheDir, cache0: dirSize(cacheDir), procs: func() []proc { return nil }}
}

// readAll reads the named files at once (several go test commands running
// side by side, e.g. through bash process substitution), or stdin when there
// are none, until each ends. Lines are passed through whole, never mixed.
func (p *printer) readAll(names []string) error {
	if len(names) == 0 {
		return p.read(os.Stdin)
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(name)
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			if err := p.read(f); err != nil {
				errs[i] = fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// read passes every line through, counts the package results and keeps each
// failed test's output, abridged, for the recap.
func (p *printer) read(r io.Reader) error {
	rc := &recapper{done: func(b *failBlock) { p.fails = append(p.fails, b) }} // called under p.mu
	defer func() { p.mu.Lock(); rc.flush(); p.mu.Unlock() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		rc.line(line)
		if m := result.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "ok":
				p.passed++
			case "FAIL":
				p.failed = append(p.failed, m[2])
			case "?":
				p.noTests++
			}
		}
		p.printlnLocked(line)
		p.mu.Unlock()
	}
	return sc.Err()
}

// summary prints the closing line and reports whether the run passed.
func (p *printer) summary() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printlnLocked(fmt.Sprintf("packages: %d passed, %d failed (%d without tests; %s)",
		p.passed, len(p.failed), p.noTests, since(p.start)))
	if len(p.failed) > 0 {
		p.printlnLocked("failed: " + strings.Join(p.failed, " "))
		if p.recap != "" && len(p.fails) > 0 {
			if err := os.WriteFile(p.recap, []byte(recapText(p.fails)), 0o644); err != nil {
				p.printlnLocked("gotestprogress: the recap: " + err.Error())
			}
		}
		return false
	}
	if p.passed == 0 {
		p.printlnLocked("gotestprogress: no package passed: no test ran")
		return false
	}
	return true
}

// heartbeat prints a progress line whenever quiet has passed without a line.
func (p *printer) heartbeat(quiet time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(quiet / 5)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		running := p.procs() // outside the lock: it reads /proc
		p.mu.Lock()
		if time.Since(p.lastLine) >= quiet {
			p.printlnLocked(p.progress(running))
		}
		p.mu.Unlock()
	}
}

func (p *printer) progress(running []proc) string {
	done := fmt.Sprint(p.passed + len(p.failed) + p.noTests)
	if p.total > 0 {
		done += fmt.Sprintf("/%d", p.total)
	}
	line := fmt.Sprintf("  … %s: %s packages reported", since(p.start), done)
	var tests []string
	compiling := 0
	for _, r := range running {
		switch {
		case strings.HasSuffix(r.name, ".test"):
			tests = append(tests, fmt.Sprintf("%s %s", r.name, r.age.Round(time.Second)))
		case r.name == "compile" || r.name == "link" || r.name == "cgo" || r.name == "asm":
			compiling++
		}
	}
	sort.Strings(tests)
	if len(tests) > 0 {
		line += "; running " + strings.Join(tests, ", ")
	}
	if compiling > 0 {
		line += fmt.Sprintf("; compiling (%d compiler processes)", compiling)
	}
	if p.cacheDir != "" {
		line += fmt.Sprintf("; build cache +%d MB", (dirSize(p.cacheDir)-p.cache0)>>20)
	}
	return line
}

func (p *printer) printlnLocked(s string) {
	fmt.Fprintln(p.out, s)
	p.lastLine = time.Now()
}

func since(t time.Time) string { return time.Since(t).Round(time.Second).String() }

// proc is a running process: its command name and how long it has run.
type proc struct {
	name string
	age  time.Duration
}

// descendants lists the processes below root, except skip, from /proc (Linux).
func descendants(root, skip int) []proc {
	type entry struct {
		ppid  int
		name  string
		start float64 // seconds after boot
	}
	all := map[int]entry{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... starttime is field 22; comm may hold spaces.
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ticks, _ := strconv.ParseFloat(f[19], 64)
		name := s[open+1 : closing] // at most 15 bytes: prefer argv[0]
		if cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && len(cmd) > 0 {
			arg0, _, _ := strings.Cut(string(cmd), "\x00")
			name = filepath.Base(arg0)
		}
		all[pid] = entry{ppid: ppid, name: name, start: ticks / 100} // USER_HZ is 100 on Linux
	}
	var uptime float64
	if b, err := os.ReadFile("/proc/uptime"); err == nil {
		uptime, _ = strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	}
	var out []proc
	for pid, e := range all {
		if pid == skip {
			continue
		}
		for a, hops := e.ppid, 0; a > 1 && hops < 64; a, hops = all[a].ppid, hops+1 {
			if a == root {
				out = append(out, proc{name: e.name, age: time.Duration((uptime - e.start) * float64(time.Second))})
				break
			}
		}
	}
	return out
}

// dirSize is the total size of the files under dir (0 when it cannot be read).
func dirSize(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
