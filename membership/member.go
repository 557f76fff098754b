package membership

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// Limits on what a member carries, in bytes. The whole encoded value is also
// bounded by the tenant's coord.Limits.MaxValueBytes (64 KiB by default).
const (
	MaxAddrLen        = 1024
	MaxMetadataKeyLen = 256
)

// Member is one registered instance, as a Watcher sees it.
type Member struct {
	Instance string            // the instance name, the last segment of the key
	Addr     string            // the address it registered ("" if none)
	Metadata map[string]string // its metadata; read-only, shared between views

	// Lease is the etcd lease the key is attached to. A re-registration after
	// the lease was lost attaches it to a new lease.
	Lease clientv3.LeaseID
	// CreateRevision and ModRevision of the key. A key deleted and put again
	// has a new CreateRevision; an overwritten key keeps it.
	CreateRevision int64
	ModRevision    int64
}

// wireValue is the JSON stored at a member key:
// {"addr":"10.0.0.7:8080","metadata":{"zone":"a"}}. Unknown fields are
// ignored on read, so the format can grow.
type wireValue struct {
	Addr     string            `json:"addr,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// servicePrefix returns "/tenants/{tenant}/members/{service}/" after validating
// both names; an error is a *ConfigError for tenantField or serviceField
// unwrapping to the *coord.NameError.
func servicePrefix(tenantField, tenant, serviceField, service string) (string, error) {
	if err := nameError(tenantField, tenant, coord.MaxTenantLen); err != nil {
		return "", err
	}
	if err := nameError(serviceField, service, coord.MaxNameLen); err != nil {
		return "", err
	}
	k, err := coord.Key(tenant, coord.KindMembers, service)
	if err != nil {
		return "", err // cannot happen: both names are valid
	}
	return k + "/", nil
}

// encodeValue validates addr and metadata and returns the stored value. Errors
// are *ConfigError.
func encodeValue(addr string, md map[string]string) (string, error) {
	if err := validateAddr(addr); err != nil {
		return "", err
	}
	for k, v := range md {
		if err := validateMetadata(k, v); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(wireValue{Addr: addr, Metadata: md})
	if err != nil {
		return "", &ConfigError{Field: "Metadata", Reason: err.Error()}
	}
	return string(b), nil
}

// decodeKV decodes one key under a service's prefix. ok is false for a key that
// is not a member record — an instance name Register would refuse (a deeper
// path, NUL, invalid UTF-8, whitespace: coord.ValidateName), or a value that
// does not decode; its Member then carries only the Instance (the key's rest
// after prefix).
func decodeKV(prefix string, kv *mvccpb.KeyValue) (m Member, ok bool) {
	inst := strings.TrimPrefix(string(kv.Key), prefix)
	if coord.ValidateName("Instance", inst, coord.MaxNameLen) == nil {
		if m, ok := decodeMember(inst, kv.Value, kv.Lease, kv.CreateRevision, kv.ModRevision); ok {
			return m, true
		}
	}
	return Member{Instance: inst}, false
}

// decodeMember builds a Member from a key's value, or reports false for a value
// that is not a member record.
func decodeMember(instance string, value []byte, lease, create, mod int64) (Member, bool) {
	var w wireValue
	if !utf8.Valid(value) || json.Unmarshal(value, &w) != nil {
		return Member{}, false
	}
	return Member{
		Instance: instance, Addr: w.Addr, Metadata: w.Metadata,
		Lease: clientv3.LeaseID(lease), CreateRevision: create, ModRevision: mod,
	}, true
}

func validateAddr(addr string) error {
	bad := func(reason string) error { return &ConfigError{Field: "Addr", Reason: reason} }
	switch {
	case len(addr) > MaxAddrLen:
		return bad("longer than " + strconv.Itoa(MaxAddrLen) + " bytes")
	case !utf8.ValidString(addr):
		return bad("not valid UTF-8")
	case strings.IndexFunc(addr, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return bad("contains whitespace or a non-printable character")
	}
	return nil
}

// validateMetadata checks one pair: the key is 1 to MaxMetadataKeyLen bytes of
// UTF-8 without control characters, the value is UTF-8 without NUL. Invalid
// UTF-8 would be replaced by U+FFFD when encoded, silently changing the data:
// it is refused instead.
func validateMetadata(k, v string) error {
	field := "Metadata[" + strconv.Quote(pgtext.Clean(k, 64)) + "]"
	bad := func(reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case k == "":
		return bad("empty key")
	case len(k) > MaxMetadataKeyLen:
		return bad("key longer than " + strconv.Itoa(MaxMetadataKeyLen) + " bytes")
	case !utf8.ValidString(k):
		return bad("key is not valid UTF-8")
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return bad("key contains a control character")
	case !utf8.ValidString(v):
		return bad("value is not valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return bad("value contains NUL")
	}
	return nil
}
