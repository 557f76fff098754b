// Package driver is coordvet's command line: the go vet protocol's extras
// (-today, a -V=full build ID that carries the date) and the standalone driver
// with text, -json, -sarif and -inventory output.
package driver

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// AddGlobalFlags registers -today and -V on fs (flag.CommandLine, before
// unitchecker or the driver parses it).
func AddGlobalFlags(fs *flag.FlagSet) {
	fs.Var(todayFlag{}, "today", "the date exceptions expire against, YYYY-MM-DD (default $"+vetutil.TodayEnv+", else the clock)")
	fs.Var(versionFlag{}, "V", "print version and exit (-V=full, for go vet's cache)")
}

// VetProtocol reports whether go vet is calling: with a unit's .cfg file, or
// asking for -flags or -V=full.
func VetProtocol(args []string) bool {
	for _, a := range args {
		if a == "-flags" || a == "--flags" || strings.HasPrefix(a, "-V") || strings.HasPrefix(a, "--V") {
			return true
		}
	}
	return len(args) > 0 && strings.HasSuffix(args[len(args)-1], ".cfg")
}

// todayFlag sets COORDVET_TODAY, which every check reads.
type todayFlag struct{}

func (todayFlag) String() string { return "" }

func (todayFlag) Set(s string) error {
	if _, err := time.Parse(vetutil.DateLayout, s); err != nil {
		return fmt.Errorf("want YYYY-MM-DD")
	}
	return os.Setenv(vetutil.TodayEnv, s)
}

// versionFlag answers -V=full like x/tools' analysisflags does, but the build
// ID also hashes the date exceptions are judged on. go vet keys its result
// cache by this ID: a new day (or a new COORDVET_TODAY) is a new key, so a
// cached run never hides an exception that expired since.
type versionFlag struct{}

func (versionFlag) IsBoolFlag() bool { return true }
func (versionFlag) String() string   { return "" }

func (versionFlag) Set(s string) error {
	if s != "full" {
		return fmt.Errorf("unsupported flag value: -V=%s (use -V=full)", s)
	}
	today, err := vetutil.Today()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	fmt.Fprintf(h, "\x00today=%s", today.Format(vetutil.DateLayout))
	fmt.Printf("%s version devel today=%s buildID=%x\n", exe, today.Format(vetutil.DateLayout), h.Sum(nil))
	os.Exit(0)
	return nil
}
