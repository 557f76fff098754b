package ownership

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
