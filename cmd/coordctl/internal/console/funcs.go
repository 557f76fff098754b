package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

// Bounds of what one page shows of a text: an error in a summary position (the
// full text is shown once, in the error history), a metadata value, a payload.
const (
	clipError    = 300
	clipMetadata = 256
)

var funcs = template.FuncMap{
	"ts":    view.TS,
	"tsp":   view.TSp,
	"age":   view.Age,
	"agem":  ageMinutes,
	"lower": strings.ToLower,
	"deref": deref,
	"has":   func(list []string, s string) bool { return slices.Contains(list, s) },
	"clip":  clip,
	"clipmd": func(md map[string]string) map[string]string {
		out := make(map[string]string, len(md))
		for k, v := range md {
			out[clip(k, 64)] = clip(v, clipMetadata)
		}
		return out
	},
	"long":    func(s string, n int) bool { return utf8.RuneCountInString(s) > n },
	"part":    part,
	"endpart": func() template.HTML { return partEnd },
	"fmtn":    func(n int64) string { return fmtThousands(n) },
	"query":   query,
	"doc":     func(v any) view.Doc { return docOf(v) },
	"pretty":  pretty,
	"target":  targetLink,
}

func deref(p any) any {
	switch v := p.(type) {
	case *float64:
		return *v
	case *int:
		return *v
	case *int64:
		return *v
	}
	return p
}

// ageMinutes is an age to the second under a minute and to the minute beyond:
// a live row (a saga's time in its state) then changes once a minute, not at
// every refresh.
func ageMinutes(sec float64) string {
	if sec < 60 {
		return view.Age(sec)
	}
	d := (time.Duration(sec) * time.Second).Round(time.Minute).String()
	return strings.TrimSuffix(d, "0s")
}

// pretty indents JSON (or returns it as it is).
func pretty(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// clip cuts s to n runes, saying how long it was.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// Live parts: a page's live region is a skeleton with parts marked by
// comments the live stream (live.go) finds again, so that a refresh sends only
// the parts that changed. A key is made of a kind and, for a row, a digest of
// its id (an id is data: it never reaches a comment as given).
const partEnd = template.HTML("<!--/p-->")

func part(kind string, id ...any) template.HTML {
	key := kind
	if len(id) > 0 {
		h := sha256.Sum256([]byte(fmt.Sprint(id...)))
		key += "-" + hex.EncodeToString(h[:6])
	}
	return template.HTML("<!--p:" + key + "-->")
}

// query is the current page's URL query with key set to value ("" removes it),
// for the pager's links.
func query(q url.Values, kv ...string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	out.Del("fragment")
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			out.Del(kv[i])
		} else {
			out.Set(kv[i], kv[i+1])
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "?" + out.Encode()
}

func fmtThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// targetLink is the page of an audit row's target: a saga, a parked event or a
// lease ("" when there is none to link).
func targetLink(action, target string) string {
	switch {
	case strings.HasSuffix(action, ".bulk"):
		return ""
	case strings.HasPrefix(action, "saga."):
		return "/sagas/" + url.PathEscape(target)
	case strings.HasPrefix(action, "outbox."):
		return "/outbox/parked/" + url.PathEscape(target)
	case strings.HasPrefix(action, "fence."):
		return "/leases?lease=" + url.QueryEscape(target)
	}
	return ""
}

// digest identifies a rendered region (the live stream's baseline).
func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// headerSafe makes an error text fit one header line.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return clip(s, 1000)
}
