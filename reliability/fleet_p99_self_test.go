package reliability

import (
	"math"
	"testing"
	"time"
)

// TestFleetP99WindowsFollowTheClock: etcd's p99 after the heal is read in 5 s
// windows cut from the sampler's scrapes at fixed times from the heal, so a
// slow scenario loop does not merge them. In CI (stop 35) the loop's checks
// took 52 s, the first window ran from the heal to then, held the storm
// (127 ms against a 63 ms baseline) and was the only one: p99 "not back within
// 60 s" though etcd had settled long before.
func TestFleetP99WindowsFollowTheClock(t *testing.T) {
	heal := time.Unix(1000, 0)
	// Requests per second: the storm's take 100 ms for 5 s, then 10 ms.
	var scrapes []etcdScrape
	var slow, fast float64
	for s := -3; s <= 16; s++ {
		if s > 0 && s <= 5 {
			slow += 100
		} else if s > 0 {
			fast += 100
		}
		scrapes = append(scrapes, etcdScrape{at: heal.Add(time.Duration(s)*time.Second + 3*time.Millisecond), buckets: map[float64]float64{
			0.016: fast, 0.128: fast + slow, math.Inf(1): fast + slow,
		}})
	}
	wins, okAfter := fleetP99Windows(scrapes, heal, 20*time.Millisecond)
	if len(wins) != 3 || wins[0] < 100*time.Millisecond || wins[1] > 20*time.Millisecond || wins[2] > 20*time.Millisecond {
		t.Errorf("windows %v: want 3 — the storm's, then two at ≤ 16 ms", wins)
	}
	if want := 10*time.Second + 3*time.Millisecond; okAfter != want {
		t.Errorf("back within 2× after %v, want %v (the end of the second window)", okAfter, want)
	}
	// Never back: -1.
	if _, ok := fleetP99Windows(scrapes, heal, time.Millisecond); ok != -1 {
		t.Errorf("a p99 never within 2× of a 1 ms baseline: back after %v, want -1", ok)
	}
	// No scrape past the first window's end yet: no window.
	if wins, ok := fleetP99Windows(scrapes[:6], heal, time.Second); len(wins) != 0 || ok != -1 {
		t.Errorf("scrapes up to 2 s after the heal: windows %v, back after %v; want none, -1", wins, ok)
	}
}
