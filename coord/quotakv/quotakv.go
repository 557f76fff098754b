// Package quotakv puts coord.Quotas in front of an etcd KV: every write (Put,
// Delete, and the write operations of a Txn) is charged to the tenant that owns its
// key, and a request over quota fails with coord.ErrQuotaExceeded before it is sent.
// Reads pass through untouched.
package quotakv

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// KV is a clientv3.KV that enforces quotas on writes. Safe for concurrent use.
type KV struct {
	clientv3.KV
	q        *coord.Quotas
	rejected metric.Int64Counter
}

// Config configures a KV. The zero value is valid.
type Config struct {
	// MeterProvider receives coordkit.quotakv.rejected (attributes: tenant, quota).
	// Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

func (c Config) withDefaults() Config {
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

// New wraps kv so that writes are charged against q. It does not block. Every
// Config is valid (there is nothing to validate).
func New(kv clientv3.KV, q *coord.Quotas, cfg Config) *KV {
	cfg = cfg.withDefaults()
	return &KV{KV: kv, q: q, rejected: newRejected(cfg)}
}

// allow asks the quotas and counts a refusal.
func (k *KV) allow(ctx context.Context, key string, writes, maxValue int) error {
	err := k.q.AllowWrite(key, writes, maxValue)
	var qe *coord.QuotaError
	if errors.As(err, &qe) {
		k.rejected.Add(ctx, 1, metric.WithAttributes(
			attribute.String(coord.AttrTenant, qe.Tenant), attribute.String(coord.AttrQuota, qe.Quota)))
	}
	return err
}

// Put checks the value size and the tenant's write rate, then calls the wrapped Put.
func (k *KV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if err := k.allow(ctx, key, 1, len(val)); err != nil {
		return nil, fmt.Errorf("quotakv: put: %w", err)
	}
	return k.KV.Put(ctx, key, val, opts...)
}

// Delete charges one write to the tenant of key, then calls the wrapped Delete.
func (k *KV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if err := k.allow(ctx, key, 1, 0); err != nil {
		return nil, fmt.Errorf("quotakv: delete: %w", err)
	}
	return k.KV.Delete(ctx, key, opts...)
}

// Do checks op when it writes, then calls the wrapped Do.
func (k *KV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if err := k.check(ctx, op); err != nil {
		return clientv3.OpResponse{}, fmt.Errorf("quotakv: do: %w", err)
	}
	return k.KV.Do(ctx, op)
}

// Txn returns a transaction whose Commit checks every write in Then and Else.
func (k *KV) Txn(ctx context.Context) clientv3.Txn {
	return &txn{Txn: k.KV.Txn(ctx), ctx: ctx, kv: k}
}

// check charges the writes of op, recursing into nested transactions. Each key is
// charged to its own tenant, so a transaction cannot hide one tenant's writes
// behind another's key.
func (k *KV) check(ctx context.Context, op clientv3.Op) error {
	switch {
	case op.IsPut():
		return k.allow(ctx, string(op.KeyBytes()), 1, len(op.ValueBytes()))
	case op.IsDelete():
		return k.allow(ctx, string(op.KeyBytes()), 1, 0)
	case op.IsTxn():
		_, thenOps, elseOps := op.Txn()
		for _, o := range append(thenOps, elseOps...) {
			if err := k.check(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

type txn struct {
	clientv3.Txn
	ctx context.Context
	kv  *KV
	ops []clientv3.Op
}

func (t *txn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *txn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.ops = append(t.ops, ops...)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *txn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.ops = append(t.ops, ops...)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *txn) Commit() (*clientv3.TxnResponse, error) {
	for _, op := range t.ops {
		if err := t.kv.check(t.ctx, op); err != nil {
			return nil, fmt.Errorf("quotakv: txn: %w", err)
		}
	}
	return t.Txn.Commit()
}
