package coord

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is the class of a key under a tenant's prefix.
type Kind string

// The kinds of keys under /tenants/{tenant}/.
const (
	KindElections Kind = "elections" // correctness leases and leader elections
	KindLocks     Kind = "locks"     // efficiency locks
	KindMembers   Kind = "members"   // group membership
	KindConfig    Kind = "config"    // fail-static configuration
	KindOwnership Kind = "ownership" // partition ownership groups (their assignment target)
)

// Limits on names, in bytes.
const (
	MaxTenantLen = 64
	MaxNameLen   = 200
)

// TenantPrefix returns "/tenants/{tenant}/". The trailing slash guarantees that no
// tenant's prefix is a prefix of another's ("acme/" vs "acme2/").
func TenantPrefix(tenant string) (string, error) {
	if err := ValidateName("tenant", tenant, MaxTenantLen); err != nil {
		return "", err
	}
	return "/tenants/" + tenant + "/", nil
}

// Prefix returns "/tenants/{tenant}/{kind}/", the prefix holding every key of one
// kind for a tenant.
func Prefix(tenant string, kind Kind) (string, error) {
	tp, err := TenantPrefix(tenant)
	if err != nil {
		return "", err
	}
	switch kind {
	case KindElections, KindLocks, KindMembers, KindConfig, KindOwnership:
	default:
		return "", &NameError{Field: "kind", Value: truncate(string(kind)), Reason: "not one of elections, locks, members, config, ownership"}
	}
	return tp + string(kind) + "/", nil
}

// Key returns "/tenants/{tenant}/{kind}/{name}" after validating every part. Errors
// match ErrInvalidName.
func Key(tenant string, kind Kind, name string) (string, error) {
	p, err := Prefix(tenant, kind)
	if err != nil {
		return "", err
	}
	if err := ValidateName("name", name, MaxNameLen); err != nil {
		return "", err
	}
	return p + name, nil
}

// TenantOf returns the tenant of a key in the tenant layout, and false for a key
// outside it.
func TenantOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "/tenants/")
	if !ok {
		return "", false
	}
	tenant, _, ok := strings.Cut(rest, "/")
	if !ok || ValidateName("tenant", tenant, MaxTenantLen) != nil {
		return "", false
	}
	return tenant, true
}

// ValidateName checks one path segment: non-empty, at most max bytes, valid UTF-8,
// no '/', no whitespace, no control or other non-printable characters, and not "."
// or "..". field names the segment in the error ("tenant", "name").
func ValidateName(field, s string, max int) error {
	bad := func(reason string) error {
		return &NameError{Field: field, Value: truncate(s), Reason: reason}
	}
	switch {
	case s == "":
		return bad("empty")
	case len(s) > max:
		return bad("longer than " + strconv.Itoa(max) + " bytes")
	case !utf8.ValidString(s):
		return bad("not valid UTF-8")
	case s == "." || s == "..":
		return bad("reserved")
	}
	for _, r := range s {
		switch {
		case r == '/':
			return bad("contains '/'")
		case r == 0:
			return bad("contains NUL")
		case unicode.IsSpace(r):
			return bad("contains whitespace")
		case !unicode.IsPrint(r):
			return bad("contains a non-printable character")
		}
	}
	return nil
}
