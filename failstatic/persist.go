package failstatic

import (
	"context"
	"slices"
	"strings"
	"time"
)

// loadDisk reads, decodes and validates the state file. It returns nil (and the
// reason, also logged and kept for Status) when there is no usable snapshot.
func (c *Cache[T]) loadDisk() (*state[T], error) {
	if c.cfg.StatePath == "" {
		return nil, nil
	}
	f, err := readSnapshotFile(c.cfg.StatePath, c.watched, c.isPrefix)
	if err != nil {
		c.setStateErr(err)
		c.log.Error("ignoring unusable state file", "err", err)
		return nil, err
	}
	if f == nil {
		return nil, nil
	}
	kvs := make([]KV, 0, len(f.KVs))
	m := make(map[string]KV, len(f.KVs))
	for _, r := range f.KVs {
		kv := KV{Key: r.Key, Value: r.Value, ModRevision: r.Mod}
		kvs = append(kvs, kv)
		m[r.Key] = kv
	}
	slices.SortFunc(kvs, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	val, err := c.cfg.Decode(kvs)
	if err == nil {
		err = c.cfg.Validate(val)
	}
	if err != nil {
		serr := &StateFileError{Path: c.cfg.StatePath, Reason: "rejected", Err: err}
		c.setStateErr(serr)
		c.log.Error("ignoring state file that no longer decodes or validates", "err", serr)
		return nil, serr
	}
	confirmed := f.ConfirmedNs
	if ns, ok := readConfirmFile(c.confirmPath(), c.watched, f.Revision); ok && ns > confirmed {
		confirmed = ns
	}
	// Staleness continues from the time it was last confirmed, on the wall clock
	// (the only clock that survives a restart). A confirmation in the future (the
	// clock went back across the restart) or at no time at all says nothing about
	// how old the snapshot is: its staleness is unknown, never fresh.
	if now := c.base.UnixNano(); confirmed <= 0 || confirmed > now {
		c.log.Warn("state file's confirmation time is in the future or unset; serving it as of unknown staleness",
			"confirmed", time.Unix(0, confirmed), "now", time.Unix(0, now))
		c.confirmedOff.Store(-int64(UnknownStaleness))
	} else {
		c.confirmedOff.Store(confirmed - now)
	}
	st := &state[T]{value: val, rev: f.Revision, source: SourceDisk, kvs: m}
	for _, kv := range m {
		st.maxMod = max(st.maxMod, kv.ModRevision)
	}
	return st, nil
}

func (c *Cache[T]) confirmPath() string { return c.cfg.StatePath + ".confirmed" }

// persistLoop writes each newly adopted live snapshot, and the time it was last
// confirmed, to the state files. Writes are coalesced: only the latest matters.
// On shutdown it writes what is pending.
func (c *Cache[T]) persistLoop(ctx context.Context) {
	if c.cfg.StatePath == "" {
		<-ctx.Done()
		return
	}
	var writtenRev, writtenConfirm int64 = -1, -1
	flush := func() {
		st := c.cur.Load()
		if st.source != SourceLive {
			return
		}
		if st.rev != writtenRev {
			if err := c.writeSnapshot(st); err != nil {
				c.setStateErr(err)
				c.log.Error("writing state file", "err", err)
				return
			}
			writtenRev, writtenConfirm = st.rev, -1
		}
		if off := c.confirmedOff.Load(); off != writtenConfirm {
			if err := c.writeConfirm(st.rev, off); err != nil {
				c.log.Warn("writing confirmation file", "err", err)
				return
			}
			writtenConfirm = off
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-c.persistKick:
			flush()
		}
	}
}

func (c *Cache[T]) wallOf(off int64) int64 { return c.base.Add(time.Duration(off)).UnixNano() }

func (c *Cache[T]) writeSnapshot(st *state[T]) error {
	f := snapshotFile{Watched: c.watched, IsPrefix: c.isPrefix, Revision: st.rev,
		ConfirmedNs: c.wallOf(c.confirmedOff.Load()), KVs: make([]kvRecord, 0, len(st.kvs))}
	for _, kv := range st.kvs {
		f.KVs = append(f.KVs, kvRecord{Key: kv.Key, Value: kv.Value, Mod: kv.ModRevision})
	}
	slices.SortFunc(f.KVs, func(a, b kvRecord) int { return strings.Compare(a.Key, b.Key) })
	b, err := encodeState(kindSnapshot, f)
	if err != nil {
		return err
	}
	return writeAtomic(c.cfg.StatePath, b)
}

func (c *Cache[T]) writeConfirm(rev, off int64) error {
	b, err := encodeState(kindConfirm, confirmFile{Watched: c.watched, Revision: rev, ConfirmedNs: c.wallOf(off)})
	if err != nil {
		return err
	}
	return writeAtomic(c.confirmPath(), b)
}
