package reliability

import (
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/reliability/internal/fleethash"
)

// TestFleetCheckCatchesBrokenSequences: the fleet scenario's check finds a
// missed event, a duplicate, a reordering and a state etcd never held, for
// per-event subscribers (a clientv3 watch), coalescing ones (failstatic) and
// revisionless views (naming/endpoints); and it times "current again" from the
// heal. Without it, the scenario's zeros would prove nothing.
func TestFleetCheckCatchesBrokenSequences(t *testing.T) {
	const key = "/tenants/x/config/k0"
	ev := func(rev int64, del bool) *clientv3.Event {
		e := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
		if del {
			e.Type = mvccpb.DELETE
		}
		return e
	}
	events := []*clientv3.Event{ev(10, false), ev(12, false), ev(14, false), ev(16, true), ev(18, false)}
	h := keyHistory(events, key)
	obs := func(ns, rev int64, state string, changes ...fleetChange) fleetObs {
		return fleetObs{ns: ns, rev: rev, state: state, changes: changes}
	}
	ch := func(rev int64) fleetChange { return fleetChange{key: key, rev: rev, del: rev == 16} }
	init := fleetObs{ns: 1, rev: 10, state: "10", init: true}
	const heal, healRev, final = 100, 15, 18

	for _, tc := range []struct {
		name     string
		perEvent bool
		obs      []fleetObs
		want     string // the counter that must be non-zero; "" for none
	}{
		{"every event, per event", true, []fleetObs{init, obs(2, 12, "12", ch(12)), obs(110, 14, "14", ch(14)), obs(120, 18, "18", ch(16), ch(18))}, ""},
		{"an event missed, per event", true, []fleetObs{init, obs(2, 12, "12", ch(12)), obs(110, 18, "18", ch(14), ch(18))}, "missed"},
		{"an event delivered twice", true, []fleetObs{init, obs(2, 12, "12", ch(12)), obs(110, 14, "14", ch(12), ch(14)), obs(120, 18, "18", ch(16), ch(18))}, "duplicated"},
		{"revisions going back", true, []fleetObs{init, obs(2, 14, "14", ch(12), ch(14)), obs(110, 12, "12", ch(12)), obs(120, 18, "18", ch(16), ch(18))}, "reordered"},
		{"a state etcd never held", false, []fleetObs{init, obs(2, 13, "14", ch(12)), obs(110, 18, "18", ch(14), ch(18))}, "wrong"},
		{"coalesced changes: the latest per key", false, []fleetObs{init, obs(110, 15, "14", ch(14)), obs(120, 18, "18", ch(18))}, ""},
		{"coalesced changes missing the latest", false, []fleetObs{init, obs(110, 15, "14", ch(12)), obs(120, 18, "18", ch(18))}, "missed"},
		{"never reaches the end", false, []fleetObs{init, obs(110, 15, "14", ch(14))}, "missed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkSub(&fleetSub{id: "p/c0", rng: key, obs: tc.obs}, h, "0", tc.perEvent, heal, healRev, final)
			got := map[string]int{"missed": v.missed, "duplicated": v.duplicated, "reordered": v.reordered, "wrong": v.wrong}
			for name, n := range got {
				if (name == tc.want) != (n > 0) {
					t.Errorf("%s = %d (want non-zero only for %q); %q", name, n, tc.want, v.msgs)
				}
			}
		})
	}

	// Current again: behind at the heal (the change at 14 came during the cut),
	// current at the first state reaching revision 14, 10 ns after the heal.
	v := checkSub(&fleetSub{id: "p/c0", rng: key, obs: []fleetObs{init, obs(2, 12, "12", ch(12)), obs(105, 13, "12"), obs(110, 14, "14", ch(14)), obs(120, 18, "18", ch(16), ch(18))}},
		h, "0", true, heal, healRev, final)
	if !v.behind || v.currentAfter != 10*time.Nanosecond {
		t.Errorf("behind %v, current after %v: want behind, current 10ns after the heal", v.behind, v.currentAfter)
	}

	// A view without revisions: states must follow etcd's in order.
	const prefix = "/tenants/x/members/api/"
	put := func(rev int64, inst, addr string) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(prefix + inst), ModRevision: rev, Value: []byte(`{"Addr":"` + addr + `"}`)}}
	}
	vh := viewHistory([]*clientv3.Event{put(5, "a", "1"), put(6, "b", "2"), put(7, "a", "3")}, prefix, true)
	s1 := fleethash.State(map[string]string{"a": "1"})
	s2 := fleethash.State(map[string]string{"a": "1", "b": "2"})
	s3 := fleethash.State(map[string]string{"a": "3", "b": "2"})
	view := func(states ...string) subVerdict {
		var os []fleetObs
		for i, s := range states {
			os = append(os, fleetObs{ns: int64(i), rev: -1, state: s})
		}
		return checkSub(&fleetSub{id: "p/w0", rng: prefix, prefix: true, obs: os}, vh, fleethash.State(nil), true, heal, 7, 7)
	}
	if v := view(s1, s2, s3); v.wrong+v.missed > 0 {
		t.Errorf("an exact view sequence flagged: %q", v.msgs)
	}
	if v := view(s1, s3, s2); v.wrong == 0 {
		t.Error("a view going back to an older state was not flagged")
	}
	if v := view(s1, s2); v.missed == 0 || !strings.Contains(strings.Join(v.msgs, " "), "last state") {
		t.Errorf("a view that never reached etcd's last state was not flagged: %q", v.msgs)
	}
}
