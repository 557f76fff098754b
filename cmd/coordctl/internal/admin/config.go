package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/failstatic"
)

// ConfigEntry is one config key in etcd.
type ConfigEntry struct {
	Key            string `json:"key"`
	Value          string `json:"value"`
	Encoding       string `json:"encoding"` // utf-8, or base64 for a value that is not
	Bytes          int    `json:"bytes"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
}

// ConfigRead is what config get read, at one revision.
type ConfigRead struct {
	Revision int64         `json:"revision"`
	Entries  []ConfigEntry `json:"entries"`
}

// Config reads /tenants/{tenant}/config/{name}, or every key under the tenant's
// config prefix (name "") or under it with name as a prefix (prefix true).
func (a *Admin) Config(ctx context.Context, tenant, name string, prefix bool) (ConfigRead, error) {
	var key string
	var err error
	switch {
	case name == "":
		key, err = coord.Prefix(tenant, coord.KindConfig)
		prefix = true
	case prefix:
		key, err = coord.Prefix(tenant, coord.KindConfig)
		key += name
	default:
		key, err = coord.Key(tenant, coord.KindConfig, name)
	}
	if err != nil {
		return ConfigRead{}, err
	}
	return a.configAt(ctx, key, prefix)
}

func (a *Admin) configAt(ctx context.Context, key string, prefix bool) (ConfigRead, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return ConfigRead{}, err
	}
	var opts []clientv3.OpOption
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	resp, err := cli.Get(clientv3.WithRequireLeader(ctx), key, opts...)
	if err != nil {
		return ConfigRead{}, fmt.Errorf("coordctl: read %s: %w", key, err)
	}
	out := ConfigRead{Revision: resp.Header.Revision, Entries: []ConfigEntry{}}
	for _, kv := range resp.Kvs {
		e := ConfigEntry{Key: string(kv.Key), Bytes: len(kv.Value), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Encoding: "utf-8", Value: string(kv.Value)}
		if !utf8.Valid(kv.Value) {
			e.Encoding, e.Value = "base64", base64.StdEncoding.EncodeToString(kv.Value)
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// Staleness is a service's last-known-good config file compared with etcd.
type Staleness struct {
	Path             string    `json:"path"`
	Watched          string    `json:"watched"`
	Prefix           bool      `json:"prefix"`
	Revision         int64     `json:"revision"`
	Keys             int       `json:"keys"`
	Confirmed        time.Time `json:"confirmed,omitzero"`
	StalenessSeconds float64   `json:"staleness_seconds"` // since it was last confirmed current (-1: unknown)
	// EtcdModRevision is the newest mod revision under Watched in etcd now (-1:
	// etcd not read); Behind is whether etcd holds a change the file lacks
	// (a deletion shows as a key count that differs).
	EtcdModRevision int64 `json:"etcd_mod_revision"`
	EtcdKeys        int   `json:"etcd_keys"`
	Behind          bool  `json:"behind"`
}

// ConfigStaleness reads a failstatic state file and, when etcd is configured,
// compares it with what etcd holds now.
func (a *Admin) ConfigStaleness(ctx context.Context, path string) (Staleness, error) {
	info, err := failstatic.ReadStateFile(path)
	if err != nil {
		return Staleness{}, err
	}
	s := Staleness{Path: path, Watched: info.Watched, Prefix: info.IsPrefix, Revision: info.Revision, Keys: info.Keys,
		Confirmed: info.Confirmed, StalenessSeconds: -1, EtcdModRevision: -1}
	if !info.Confirmed.IsZero() {
		s.StalenessSeconds = seconds(a.cfg.Now().Sub(info.Confirmed))
	}
	if a.cfg.Etcd == nil {
		return s, nil
	}
	now, err := a.configAt(ctx, info.Watched, info.IsPrefix)
	if err != nil {
		return s, err
	}
	s.EtcdModRevision, s.EtcdKeys = 0, len(now.Entries)
	for _, e := range now.Entries {
		s.EtcdModRevision = max(s.EtcdModRevision, e.ModRevision)
	}
	s.Behind = s.EtcdModRevision > info.MaxModRevision || s.EtcdKeys != info.Keys
	return s, nil
}
