package coord

import (
	"errors"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	got, err := Key("acme", KindElections, "billing")
	if err != nil || got != "/tenants/acme/elections/billing" {
		t.Fatalf("Key = %q, %v", got, err)
	}
	if p, _ := Prefix("acme", KindConfig); p != "/tenants/acme/config/" {
		t.Fatalf("Prefix = %q", p)
	}
	if p, _ := Prefix("acme", KindOwnership); p != "/tenants/acme/ownership/" {
		t.Fatalf("Prefix(KindOwnership) = %q", p)
	}
	if tn, ok := TenantOf(got); !ok || tn != "acme" {
		t.Fatalf("TenantOf = %q %v", tn, ok)
	}
	for _, k := range []string{"/other/acme/x", "/tenants/", "/tenants/acme", "/tenants//x", "/tenants/a b/x"} {
		if tn, ok := TenantOf(k); ok {
			t.Errorf("TenantOf(%q) = %q, want outside layout", k, tn)
		}
	}
}

func TestKeyRejects(t *testing.T) {
	tests := []struct {
		tenant, name string
		kind         Kind
		field        string
	}{
		{"", "n", KindLocks, "tenant"},
		{"a/b", "n", KindLocks, "tenant"},
		{strings.Repeat("t", MaxTenantLen+1), "n", KindLocks, "tenant"},
		{"a\x00", "n", KindLocks, "tenant"},
		{"a\xff", "n", KindLocks, "tenant"},
		{"..", "n", KindLocks, "tenant"},
		{"acme", "", KindLocks, "name"},
		{"acme", "x/y", KindLocks, "name"},
		{"acme", "x y", KindLocks, "name"},
		{"acme", "x\ty", KindLocks, "name"},
		{"acme", "bell\a", KindLocks, "name"},
		{"acme", "\u200bzero-width", KindLocks, "name"},
		{"acme", "bad\xc3\x28", KindLocks, "name"},
		{"acme", strings.Repeat("n", MaxNameLen+1), KindLocks, "name"},
		{"acme", "n", Kind("secrets"), "kind"},
		{"acme", "n", Kind(""), "kind"},
	}
	for _, tt := range tests {
		_, err := Key(tt.tenant, tt.kind, tt.name)
		var ne *NameError
		if !errors.As(err, &ne) || !errors.Is(err, ErrInvalidName) {
			t.Errorf("Key(%q, %q, %q) error = %v, want *NameError", tt.tenant, tt.kind, tt.name, err)
			continue
		}
		if ne.Field != tt.field {
			t.Errorf("Key(%q, %q, %q) blamed %s, want %s", tt.tenant, tt.kind, tt.name, ne.Field, tt.field)
		}
	}
	if _, err := Key("acme", KindLocks, "ünïcødé-ok"); err != nil {
		t.Errorf("printable unicode rejected: %v", err)
	}
}

// TestPrefixesNeverOverlap: no key of one tenant lies under another tenant's prefix,
// even when one tenant name is a prefix of the other.
func TestPrefixesNeverOverlap(t *testing.T) {
	tenants := []string{"a", "ab", "a-b", "a.b", "abc", "b"}
	for _, t1 := range tenants {
		p1, _ := TenantPrefix(t1)
		for _, t2 := range tenants {
			if t1 == t2 {
				continue
			}
			k, _ := Key(t2, KindConfig, "x")
			p2, _ := TenantPrefix(t2)
			if strings.HasPrefix(k, p1) || strings.HasPrefix(p2, p1) {
				t.Errorf("tenant %q prefix %q overlaps tenant %q (%q)", t1, p1, t2, k)
			}
		}
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range [][2]string{{"acme", "billing"}, {"a", "b/c"}, {"a\x00", "b"}, {"ü", "名前"}, {"a", ".."}, {"acme2", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tenant, name string) {
		k, err := Key(tenant, KindLocks, name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error %v is not ErrInvalidName", err)
			}
			return
		}
		// A valid key names exactly its tenant and has exactly four segments.
		if got, ok := TenantOf(k); !ok || got != tenant {
			t.Fatalf("TenantOf(%q) = %q, %v; want %q", k, got, ok, tenant)
		}
		if n := strings.Count(k, "/"); n != 4 {
			t.Fatalf("key %q has %d slashes", k, n)
		}
		// No other tenant's prefix contains it.
		other, _ := TenantPrefix(tenant + "x")
		if strings.HasPrefix(k, other) {
			t.Fatalf("key %q under foreign prefix %q", k, other)
		}
	})
}
