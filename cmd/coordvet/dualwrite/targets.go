package dualwrite

import (
	"fmt"
	"go/types"
	"strings"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// target is one function or method the check looks for.
type target struct {
	pkg  string // import path
	typ  string // receiver type name; "" for a package function or any method
	name string
}

// parseTarget parses "importpath:Name" or "importpath:Type.Name".
func parseTarget(s string) (target, error) {
	s = strings.TrimSpace(s)
	pkg, rest, ok := strings.Cut(s, ":")
	if !ok || pkg == "" || rest == "" {
		return target{}, fmt.Errorf("dualwrite: %q: want importpath:Name or importpath:Type.Name", s)
	}
	typ, name, hasType := strings.Cut(rest, ".")
	if !hasType {
		typ, name = "", rest
	}
	if name == "" || strings.Contains(name, ".") || (hasType && typ == "") {
		return target{}, fmt.Errorf("dualwrite: %q: want importpath:Name or importpath:Type.Name", s)
	}
	return target{pkg: pkg, typ: typ, name: name}, nil
}

func (t target) matches(fn *types.Func) bool {
	if fn.Name() != t.name || vetutil.FuncPkg(fn) != t.pkg {
		return false
	}
	return t.typ == "" || vetutil.RecvName(fn) == t.typ
}

// defaultCommits are the calls that commit a database transaction.
func defaultCommits() []string {
	return []string{
		"database/sql:Tx.Commit",
		"github.com/jackc/pgx/v5:Tx.Commit",
		"github.com/jackc/pgx/v5:BeginFunc",
		"github.com/jackc/pgx/v5:BeginTxFunc",
		"github.com/jackc/pgx/v5/pgxpool:Tx.Commit",
		"github.com/jackc/pgx/v4:Tx.Commit",
		"github.com/jackc/pgx/v4:BeginFunc",
		"github.com/jackc/pgx/v4/pgxpool:Pool.BeginFunc",
		"gorm.io/gorm:DB.Commit",
		"gorm.io/gorm:DB.Transaction",
	}
}

// defaultBrokers are the calls that publish to a broker.
func defaultBrokers() []string {
	var out []string
	add := func(pkg string, names ...string) {
		for _, n := range names {
			out = append(out, pkg+":"+n)
		}
	}
	add("github.com/twmb/franz-go/pkg/kgo", "Client.Produce", "Client.ProduceSync", "Client.TryProduce")
	for _, sarama := range []string{"github.com/IBM/sarama", "github.com/Shopify/sarama"} {
		add(sarama, "SyncProducer.SendMessage", "SyncProducer.SendMessages", "AsyncProducer.Input")
	}
	add("github.com/segmentio/kafka-go", "Writer.WriteMessages")
	for _, nats := range []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream"} {
		add(nats, "Publish", "PublishMsg", "PublishAsync", "PublishMsgAsync")
	}
	add("github.com/rabbitmq/amqp091-go", "Channel.Publish", "Channel.PublishWithContext",
		"Channel.PublishWithDeferredConfirm", "Channel.PublishWithDeferredConfirmWithContext")
	add("github.com/streadway/amqp", "Channel.Publish")
	add("github.com/ThreeDotsLabs/watermill/message", "Publisher.Publish")
	return out
}

// listFlag is a flag.Value holding comma-separated targets; each Set appends.
type listFlag struct{ targets []target }

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(l.targets))
	for i, t := range l.targets {
		parts[i] = t.pkg + ":" + strings.TrimPrefix(t.typ+"."+t.name, ".")
	}
	return strings.Join(parts, ",")
}

func (l *listFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		t, err := parseTarget(part)
		if err != nil {
			return err
		}
		l.targets = append(l.targets, t)
	}
	return nil
}
