package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// BenchmarkConsolePagesAt100000Rows measures the Sagas and Outbox pages over
// 100,000 sagas and 100,000 parked events: each page's server time (one GET of
// the page over loopback, as a browser asks for it; p50 and max over b.N), its
// size, and the bytes a live refresh sends with nothing changed and with one
// row changed per refresh. The figures are in docs/benchmarks.md with the
// command:
//
//	cd cmd/coordctl && go test -run '^$' -bench ConsolePagesAt100000Rows -benchtime 1x ./internal/console
//
// (It measures a fixed number of requests per page, pageRuns, whatever b.N is:
// the 200,000 rows take longer to load than the pages to serve.)
func BenchmarkConsolePagesAt100000Rows(b *testing.B) {
	e := testenv.Seeded(b)
	for _, s := range []struct {
		n            int
		state, error string
	}{{60000, "completed", ""}, {20000, "running", "payment provider: 503"}, {10000, "compensating", "ledger: account 4411 is LOCKED"},
		{5000, "compensated", ""}, {5000, "needs_human", "refund API: 401 expired credential"}} {
		e.StartMany(b, s.n, s.state, "order", s.state, s.error)
	}
	for k := range 100 {
		e.ParkMany(b, 1000, fmt.Sprintf("invoice-batch-%03d", k), "schema registry: subject orders-value not found")
	}
	for _, tb := range []string{"coord_sagas", "coord_outbox_parked", "coord_outbox"} { // what autovacuum does after such a load
		if _, err := e.DB.Pool.Exec(testenv.Ctx(b), `VACUUM ANALYZE `+tb); err != nil {
			b.Fatal(err)
		}
	}
	base := serve(b, e, console.Config{Actor: "bench"})
	c := client(b)
	_, first := get(b, c, base+"/sagas?state=running", nil)
	m := regexp.MustCompile(`href="/sagas\?([^"]*)" id="next"`).FindStringSubmatch(first)
	if m == nil {
		b.Fatal("the first page of running sagas has no next page")
	}
	q, err := url.ParseQuery(html.UnescapeString(m[1]))
	if err != nil {
		b.Fatal(err)
	}
	cursor := q.Get("after")
	pages := []string{"/sagas", "/sagas?state=needs_human", "/sagas?state=running&after=" + url.QueryEscape(cursor), "/sagas?q=expired+credential",
		"/sagas?q=running-00420", "/outbox", "/outbox?key=invoice-batch-042", "/outbox?q=orders-value", "/outbox?q=invoice-batch-09"}
	b.ResetTimer()
	for _, p := range pages {
		var took []time.Duration
		size := 0
		for range pageRuns {
			start := time.Now()
			resp, body := get(b, c, base+p, nil)
			took = append(took, time.Since(start))
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: %d %s", p, resp.StatusCode, body)
			}
			size = len(body)
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		fmt.Printf("coordctl page %-45s p50 %6.1f ms  max %6.1f ms  %7d bytes\n", p, ms(took[len(took)/2]), ms(took[len(took)-1]), size)
	}
	b.StopTimer()

	// Bytes per refresh: 10 refreshes with nothing changed, then 10 with one row changed each.
	for _, p := range []string{"/sagas", "/outbox"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		events := stream(b, ctx, base, p, true)
		quiet, changed := 0, 0
		var kinds []string
		for range 10 {
			ev := <-events
			quiet += ev.bytes
			kinds = append(kinds, fmt.Sprintf("%s:%d", ev.name, ev.bytes))
		}
		for i := range 10 {
			if p == "/sagas" {
				_, err := e.DB.Pool.Exec(ctx, `UPDATE coord_sagas SET attempts = attempts + 1 WHERE id = (SELECT id FROM coord_sagas ORDER BY state_since, id LIMIT 1 OFFSET $1)`, i)
				if err != nil {
					b.Fatal(err)
				}
			} else if _, err := e.DB.Pool.Exec(ctx, `UPDATE coord_outbox_parked SET last_error = 'broker: error '||$1 WHERE id = (SELECT id FROM coord_outbox_parked ORDER BY seq LIMIT 1 OFFSET $1)`, i); err != nil {
				b.Fatal(err)
			}
			ev := <-events
			changed += ev.bytes
			kinds = append(kinds, fmt.Sprintf("%s:%d", ev.name, ev.bytes))
		}
		cancel()
		fmt.Printf("coordctl live %-8s refresh: %5.0f bytes with nothing changed, %5.0f bytes with one row changed (mean of 10 each): %s\n", p, float64(quiet)/10, float64(changed)/10, strings.Join(kinds, " "))
	}
}

// pageRuns is how many times each page is fetched.
const pageRuns = 20

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
