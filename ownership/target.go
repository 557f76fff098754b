package ownership

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// target is the assignment stored at the group's target key: the owner member
// id of every partition. It is written only by compare-and-set on the key's
// previous mod revision, by any member whose computed next target differs.
type target struct {
	Partitions int
	Owners     []string // len Partitions; "" for none
	Revision   int64    // mod revision of the key; 0 when absent
}

// wireTarget is the stored form: {"v":1,"partitions":P,"members":[ids],
// "owners":base64(uint16 LE per partition: 1 + index in members, 0 = none)}.
// Two bytes per partition: 65536 partitions take 171 KiB.
type wireTarget struct {
	V          int      `json:"v"`
	Partitions int      `json:"partitions"`
	Members    []string `json:"members"`
	Owners     string   `json:"owners"`
}

func encodeTarget(owners []string) ([]byte, error) {
	var members []string
	for _, o := range owners {
		if o != "" && !slices.Contains(members, o) {
			members = append(members, o)
		}
	}
	slices.Sort(members)
	if len(members) >= 1<<16-1 {
		return nil, errors.New("ownership: too many members for a target")
	}
	raw := make([]byte, 2*len(owners))
	for i, o := range owners {
		if o == "" {
			continue
		}
		j, _ := slices.BinarySearch(members, o)
		binary.LittleEndian.PutUint16(raw[2*i:], uint16(j+1))
	}
	return json.Marshal(wireTarget{V: 1, Partitions: len(owners), Members: members, Owners: base64.StdEncoding.EncodeToString(raw)})
}

func decodeTarget(b []byte, rev int64) (target, error) {
	var w wireTarget
	if err := json.Unmarshal(b, &w); err != nil {
		return target{}, fmt.Errorf("ownership: malformed target: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(w.Owners)
	if err != nil || w.V != 1 || w.Partitions < 1 || w.Partitions > MaxPartitions || len(raw) != 2*w.Partitions {
		return target{}, fmt.Errorf("ownership: malformed target (v %d, %d partitions, %d owner bytes)", w.V, w.Partitions, len(raw))
	}
	t := target{Partitions: w.Partitions, Owners: make([]string, w.Partitions), Revision: rev}
	for i := range t.Owners {
		j := int(binary.LittleEndian.Uint16(raw[2*i:]))
		if j > len(w.Members) {
			return target{}, fmt.Errorf("ownership: malformed target: partition %d owner index %d of %d members", i, j, len(w.Members))
		}
		if j > 0 {
			t.Owners[i] = w.Members[j-1]
		}
	}
	return t, nil
}

// A target whose one-key form would exceed the tenant's value quota (RFC MUST
// 7: 64 KiB per value; from about 24,000 partitions) is stored in chunks: the
// head at the target key, {"v":2,"partitions":P,"members":[ids],"chunk":C,
// "chunks":n}, and chunk i at target/i holding base64(uint16 LE owners) of
// partitions [i·C, (i+1)·C). All are written in one transaction, so every chunk
// carries the head's mod revision; a chunk of another revision (or missing) makes
// the target malformed, to be rewritten. 65,536 partitions: a head and four
// chunks of 43 KiB.
const targetChunk = 16384

// maxTargetValue is the largest value a target key may hold (the RFC's value
// quota).
const maxTargetValue = 64 << 10

type wireHead struct {
	V          int      `json:"v"`
	Partitions int      `json:"partitions"`
	Members    []string `json:"members"`
	Chunk      int      `json:"chunk"`
	Chunks     int      `json:"chunks"`
}

// chunkKey is the key of chunk i of the target at head.
func chunkKey(head string, i int) string { return head + "/" + strconv.Itoa(i) }

// targetOps returns the puts that store owners at head: one key when it fits
// the value quota, else the head and its chunks.
func targetOps(head string, owners []string) ([]clientv3.Op, error) {
	b, err := encodeTarget(owners)
	if err != nil {
		return nil, err
	}
	if len(b) <= maxTargetValue {
		return []clientv3.Op{clientv3.OpPut(head, string(b))}, nil
	}
	var w wireTarget
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	raw, _ := base64.StdEncoding.DecodeString(w.Owners)
	n := (len(owners) + targetChunk - 1) / targetChunk
	hb, err := json.Marshal(wireHead{V: 2, Partitions: len(owners), Members: w.Members, Chunk: targetChunk, Chunks: n})
	if err != nil {
		return nil, err
	}
	if len(hb) > maxTargetValue {
		return nil, fmt.Errorf("ownership: target head of %d members is %d bytes, over the %d-byte value quota", len(w.Members), len(hb), maxTargetValue)
	}
	ops := []clientv3.Op{clientv3.OpPut(head, string(hb))}
	for i := range n {
		part := raw[2*i*targetChunk : 2*min(len(owners), (i+1)*targetChunk)]
		ops = append(ops, clientv3.OpPut(chunkKey(head, i), base64.StdEncoding.EncodeToString(part)))
	}
	return ops, nil
}

// readTarget assembles the target at head from the keys read under it (the head
// and its chunks, in any order). found is false when there is no head; rev is
// the head's mod revision (also when the target is malformed).
func readTarget(kvs []*mvccpb.KeyValue, head string) (t target, rev int64, found bool, err error) {
	byKey := make(map[string]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		byKey[string(kv.Key)] = kv
	}
	h := byKey[head]
	if h == nil {
		return target{}, 0, false, nil
	}
	rev = h.ModRevision
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(h.Value, &v); err != nil || v.V != 2 {
		t, err := decodeTarget(h.Value, rev)
		return t, rev, true, err
	}
	var w wireHead
	if err := json.Unmarshal(h.Value, &w); err != nil {
		return target{}, rev, true, fmt.Errorf("ownership: malformed target head: %w", err)
	}
	if w.Partitions < 1 || w.Partitions > MaxPartitions || w.Chunk < 1 || w.Chunks != (w.Partitions+w.Chunk-1)/w.Chunk {
		return target{}, rev, true, fmt.Errorf("ownership: malformed target head (%d partitions, chunk %d, %d chunks)", w.Partitions, w.Chunk, w.Chunks)
	}
	raw := make([]byte, 0, 2*w.Partitions)
	for i := range w.Chunks {
		c := byKey[chunkKey(head, i)]
		if c == nil || c.ModRevision != rev {
			return target{}, rev, true, fmt.Errorf("ownership: malformed target: chunk %d missing or of another revision", i)
		}
		part, err := base64.StdEncoding.DecodeString(string(c.Value))
		if err != nil {
			return target{}, rev, true, fmt.Errorf("ownership: malformed target chunk %d: %w", i, err)
		}
		raw = append(raw, part...)
	}
	b, err := json.Marshal(wireTarget{V: 1, Partitions: w.Partitions, Members: w.Members, Owners: base64.StdEncoding.EncodeToString(raw)})
	if err != nil {
		return target{}, rev, true, err
	}
	t, err = decodeTarget(b, rev)
	return t, rev, true, err
}
