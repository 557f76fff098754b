// Package failstatic serves configuration watched from etcd and keeps serving it
// when etcd is gone (RFC-COORD-001 MUST 6).
//
// A Cache reads a key or a prefix at one revision, watches from the next one,
// resumes from its last revision after any disconnect (full-jitter backoff,
// 100 ms → 30 s, forever) and re-lists with a full read after a compaction. Every
// new snapshot is decoded and validated before it is adopted; a rejected snapshot
// leaves the last good one in place and is counted and logged. The last-known-good
// snapshot is persisted atomically (temp file, fsync, rename, directory fsync) with
// a format version and a SHA-256 checksum, and New starts from that file when etcd
// is unreachable.
//
// Reads (Get) are lock-free and allocation-free. Each returns the value with its
// revision, its source (live or disk) and its staleness: the time since the cache
// was last confirmed current by a probe that does not depend on the watch stream
// (a linearizable read compared with the cache). Staleness is exported as
// coordkit.failstatic.staleness. A key class may declare a maximum staleness
// after which its keys fail closed with ErrStale while every other key keeps
// serving.
package failstatic
