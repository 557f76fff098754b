// Command reliabilityreport checks the rows written by the fault scenarios
// (coordtest.Report through COORD_RELIABILITY_REPORT) against the manifest of
// expected scenarios and, only when the run holds up, renders them into the
// generated section of docs/reliability.md.
//
//	reliabilityreport -in report.jsonl -manifest scenarios.tsv -tier full \
//	    -doc ../docs/reliability.md -out /tmp/reliability.md -cmd "scripts/chaos.sh"
//
// The run is refused (exit status 1, -out not written, every problem listed on
// stderr) when a manifest scenario is missing, a scenario is reported twice or is
// not in the manifest, a scenario started but never finished (cut short by the
// test timeout or a crash), failed, or has a declared fault counted 0.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"
)

func main() {
	in := flag.String("in", "", "JSON lines written by the scenarios")
	manifest := flag.String("manifest", "", "the expected scenarios (package, tier, scenario per line)")
	tier := flag.String("tier", "full", "the tier that ran: bounded or full")
	doc := flag.String("doc", "", "the markdown file whose generated section is replaced")
	out := flag.String("out", "", "where to write the updated document")
	cmd := flag.String("cmd", "scripts/chaos.sh", "the command that produced the figures")
	flag.Parse()
	if *in == "" || *manifest == "" || *doc == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *manifest, *tier, *doc, *out, *cmd, time.Now()); err != nil {
		log.SetFlags(0)
		log.Fatal(err)
	}
}

// run checks the rows in inPath against the manifest and writes docPath, with its
// generated section replaced, to outPath. On any problem it writes nothing.
func run(inPath, manifestPath, tier, docPath, outPath, cmd string, now time.Time) error {
	rows, err := readRows(inPath)
	if err != nil {
		return err
	}
	want, err := readManifest(manifestPath)
	if err != nil {
		return err
	}
	results, problems := check(rows, want, tier)
	if len(problems) > 0 {
		msg := fmt.Sprintf("reliabilityreport: %d problem(s); %s not written:", len(problems), outPath)
		for _, p := range problems {
			msg += "\n  - " + p
		}
		return fmt.Errorf("%s", msg)
	}
	old, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	updated, err := replaceSection(string(old), render(results, cmd, now))
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(outPath, []byte(updated), 0o644)
}
