package labelcap

import (
	"fmt"
	"sync"
	"testing"
)

func TestSetAdmitsMaxDistinctValues(t *testing.T) {
	full := 0
	s := New(3, func() { full++ })
	for _, v := range []string{"a", "b", "a", "c"} {
		if got := s.Value(v); got != v {
			t.Fatalf("Value(%q) = %q within the cap", v, got)
		}
	}
	for _, v := range []string{"d", "e", "d"} {
		if got := s.Value(v); got != Other {
			t.Fatalf("Value(%q) = %q beyond the cap, want %q", v, got, Other)
		}
	}
	if s.Value("b") != "b" || full != 1 {
		t.Fatalf("admitted value lost, or full called %d times (want once)", full)
	}
}

func TestSetConcurrent(t *testing.T) {
	s := New(50, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[string]bool{}
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				v := fmt.Sprint(i)
				if got := s.Value(v); got != Other {
					mu.Lock()
					admitted[got] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(admitted) != 50 {
		t.Fatalf("%d values admitted, want 50", len(admitted))
	}
}
