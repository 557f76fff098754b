package reliability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker must be able to fail: hand-made histories that violate the model.
func TestFencedRegisterModel(t *testing.T) {
	incr := func(tok int64, id string) RegisterInput { return RegisterInput{Kind: OpIncr, Token: tok, ID: id} }
	ok := func(v int64) RegisterOutput { return RegisterOutput{Accepted: true, Value: v} }
	rej := RegisterOutput{}
	cases := []struct {
		name string
		h    func(h *History)
		want porcupine.CheckResult
		regr int
	}{
		{"sequential tokens", func(h *History) {
			h.Add(0, incr(5, "a"), ok(1), 0, 1)
			h.Add(1, incr(7, "b"), ok(2), 2, 3)
			h.Add(0, incr(5, "c"), rej, 4, 5)
			h.Add(2, RegisterInput{Kind: OpRead}, RegisterOutput{Value: 2}, 6, 7)
		}, porcupine.Ok, 0},
		{"stale write accepted", func(h *History) {
			h.Add(1, incr(7, "b"), ok(1), 0, 1)
			h.Add(0, incr(5, "a"), ok(2), 2, 3)
		}, porcupine.Illegal, 1},
		{"lost increment", func(h *History) {
			h.Add(0, incr(5, "a"), ok(1), 0, 1)
			h.Add(0, incr(5, "b"), ok(1), 2, 3)
		}, porcupine.Illegal, 0},
		{"rejection without a newer token", func(h *History) {
			h.Add(0, incr(5, "a"), ok(1), 0, 1)
			h.Add(0, incr(5, "b"), rej, 2, 3)
		}, porcupine.Illegal, 0},
		{"concurrent overlap may order either way", func(h *History) {
			h.Add(0, incr(5, "a"), ok(2), 0, 10)
			h.Add(1, incr(5, "b"), ok(1), 1, 9)
		}, porcupine.Ok, 0},
	}
	for _, c := range cases {
		h := NewHistory()
		c.h(h)
		if got := h.Check(10 * time.Second); got != c.want {
			t.Errorf("%s: Check = %v, want %v", c.name, got, c.want)
		}
		if got := h.TokenRegressions(); got != c.regr {
			t.Errorf("%s: TokenRegressions = %d, want %d", c.name, got, c.regr)
		}
	}
}
