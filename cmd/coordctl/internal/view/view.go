// Package view renders coordctl's read models as terminal tables or JSON. It is
// pure (no I/O but the writer), so golden tests pin every command's output.
package view

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Section is a titled table or a list of fields. A Title is printed as given:
// the fixed ones are upper case, those naming data (a tenant, a group) keep it.
type Section struct {
	Title  string
	Fields [][2]string // name, value (a vertical listing)
	Header []string
	Rows   [][]string
	Empty  string // printed instead of an empty table
}

// Doc is what one command prints: its sections, in order.
type Doc []Section

// Write prints d as aligned columns.
func Write(w io.Writer, d Doc) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, s := range d {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if s.Title != "" {
			fmt.Fprintln(tw, s.Title)
		}
		for _, f := range s.Fields {
			fmt.Fprintf(tw, "%s:\t%s\n", f[0], cell(f[1], 200))
		}
		if s.Header != nil {
			if len(s.Rows) == 0 && s.Empty != "" {
				fmt.Fprintln(tw, s.Empty)
				continue
			}
			fmt.Fprintln(tw, strings.Join(s.Header, "\t"))
			for _, r := range s.Rows {
				cells := make([]string, len(r))
				for j, c := range r {
					cells[j] = cell(c, 60)
				}
				fmt.Fprintln(tw, strings.Join(cells, "\t"))
			}
		}
	}
	return tw.Flush()
}

// JSON prints v as indented JSON.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cell makes s safe for a terminal cell: control characters (an ANSI escape in
// an error text, a tab that would break the columns) become visible, and it is
// cut at max runes.
func cell(s string, max int) string {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			b.WriteString(strconv.QuoteRune(r)[1 : len(strconv.QuoteRune(r))-1])
		default:
			b.WriteRune(r)
		}
		n++
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// TS formats a time for a table: UTC, seconds.
func TS(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// TSp formats an optional time.
func TSp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return TS(*t)
}

// Age formats seconds as a duration to the second ("-" when negative: unknown).
func Age(sec float64) string {
	if sec < 0 {
		return "-"
	}
	return (time.Duration(sec * float64(time.Second))).Round(time.Second).String()
}

func itoa[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
