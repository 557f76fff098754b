package effects

import (
	"fmt"
	"go/types"
	"strings"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// Kind is what a call does, as the checks see it.
type Kind string

const (
	// Commit commits a database transaction (or runs one to its commit).
	Commit Kind = "commit"
	// Write is an autocommitted write: Exec, Query or QueryRow on a pool, a
	// connection or a *sql.DB, outside any transaction. Exec counts unless its
	// SQL is a constant read; Query and QueryRow count only when their SQL is a
	// constant write (INSERT, UPDATE, DELETE, MERGE).
	Write Kind = "autocommit write"
	// Begin begins a transaction.
	Begin Kind = "begin"
	// Publish sends a message to a broker.
	Publish Kind = "publish"
	// InTx runs its function argument in the caller's transaction; the call
	// itself commits nothing.
	InTx Kind = "runs fn in the caller's transaction"
	// Fence checks a fencing token at the resource.
	Fence Kind = "fence"
)

// Entry is one row of the table: a function or method and what calling it does.
type Entry struct {
	// Target is importpath:Name (a package function, or a method Name of any
	// type of the package) or importpath:Type.Name (a method of one type).
	Target string
	Kind   Kind
	// TxParam is the index of a function parameter that runs inside the
	// transaction (it joins the caller's unit), or -1.
	TxParam int
	// Query marks Query/QueryRow-like writes (see Write).
	Query bool
	// Shape is the method's signature without names, for clients whose
	// signature mentions no type of their own package: an interface method of
	// that name and shape is taken for the client's.
	Shape string

	pkg, typ, name string
}

const sdk = vetutil.SDK

// Builtin returns the built-in table, in documentation order. It is the one
// place the checks learn which calls commit, write, begin, publish or fence;
// docs/vet.md renders it (TestVetMD keeps them equal).
func Builtin() []Entry {
	var t []Entry
	add := func(kind Kind, txParam int, targets ...string) {
		for _, s := range targets {
			t = append(t, Entry{Target: s, Kind: kind, TxParam: txParam})
		}
	}
	// The SDK's own committing helpers: fn runs in a transaction they commit.
	add(Commit, 3, sdk+"/correctnesslease/pgfence:Exec", sdk+"/correctnesslease/pgfence:Fence.Exec", sdk+"/idempotency:Store.Do")
	add(Commit, -1, sdk+"/idempotency:Store.Run", sdk+"/saga:Start")
	// The SDK's helpers that run fn in the caller's transaction (no commit).
	add(InTx, 4, sdk+"/idempotency:Store.DoTx", sdk+"/outbox:Inbox.ProcessTx")
	// Drivers.
	add(Commit, -1, "database/sql:Tx.Commit", "github.com/jackc/pgx/v5:Tx.Commit", "github.com/jackc/pgx/v5/pgxpool:Tx.Commit",
		"github.com/jackc/pgx/v4:Tx.Commit", "gorm.io/gorm:DB.Commit")
	add(Commit, 2, "github.com/jackc/pgx/v5:BeginFunc", "github.com/jackc/pgx/v4:BeginFunc")
	add(Commit, 3, "github.com/jackc/pgx/v5:BeginTxFunc", "github.com/jackc/pgx/v4:BeginTxFunc")
	add(Commit, 1, "github.com/jackc/pgx/v4/pgxpool:Pool.BeginFunc", "github.com/jackc/pgx/v4:Conn.BeginFunc")
	add(Commit, 0, "gorm.io/gorm:DB.Transaction")
	for _, pool := range []string{"github.com/jackc/pgx/v5/pgxpool:Pool", "github.com/jackc/pgx/v5:Conn", "github.com/jackc/pgx/v4/pgxpool:Pool", "github.com/jackc/pgx/v4:Conn"} {
		add(Write, -1, pool+".Exec", pool+".SendBatch", pool+".CopyFrom")
		add(Begin, -1, pool+".Begin", pool+".BeginTx")
		for _, q := range []string{pool + ".Query", pool + ".QueryRow"} {
			t = append(t, Entry{Target: q, Kind: Write, TxParam: -1, Query: true})
		}
	}
	add(Write, -1, "database/sql:DB.Exec", "database/sql:DB.ExecContext")
	for _, q := range []string{"database/sql:DB.Query", "database/sql:DB.QueryContext", "database/sql:DB.QueryRow", "database/sql:DB.QueryRowContext"} {
		t = append(t, Entry{Target: q, Kind: Write, TxParam: -1, Query: true})
	}
	add(Begin, -1, "database/sql:DB.Begin", "database/sql:DB.BeginTx", "database/sql:Conn.BeginTx", "gorm.io/gorm:DB.Begin")
	// Brokers, the SDK's publishers first (publishing outside the outbox relay
	// is a dual write like any other).
	add(Publish, -1, sdk+"/outbox:Publisher.Publish", sdk+"/outbox:PublisherFunc.Publish",
		sdk+"/outbox/kafka:Publisher.Publish", sdk+"/outbox/natsjs:Publisher.Publish")
	add(Publish, -1, "github.com/twmb/franz-go/pkg/kgo:Client.Produce", "github.com/twmb/franz-go/pkg/kgo:Client.ProduceSync", "github.com/twmb/franz-go/pkg/kgo:Client.TryProduce")
	for _, sarama := range []string{"github.com/IBM/sarama", "github.com/Shopify/sarama"} {
		add(Publish, -1, sarama+":SyncProducer.SendMessage", sarama+":SyncProducer.SendMessages", sarama+":AsyncProducer.Input")
	}
	add(Publish, -1, "github.com/segmentio/kafka-go:Writer.WriteMessages")
	for _, nats := range []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream"} {
		add(Publish, -1, nats+":Publish", nats+":PublishMsg", nats+":PublishAsync", nats+":PublishMsgAsync")
	}
	t = append(t, Entry{Target: "github.com/nats-io/nats.go:Conn.Publish", Kind: Publish, TxParam: -1, Shape: "func(string, []byte) error"})
	add(Publish, -1, "github.com/rabbitmq/amqp091-go:Channel.Publish", "github.com/rabbitmq/amqp091-go:Channel.PublishWithContext",
		"github.com/rabbitmq/amqp091-go:Channel.PublishWithDeferredConfirm", "github.com/rabbitmq/amqp091-go:Channel.PublishWithDeferredConfirmWithContext",
		"github.com/streadway/amqp:Channel.Publish")
	add(Publish, -1, "github.com/ThreeDotsLabs/watermill/message:Publisher.Publish")
	// Fences: where a token is checked at the resource.
	add(Fence, -1, sdk+"/correctnesslease/pgfence:GuardTx", sdk+"/correctnesslease/pgfence:Fence.GuardTx", sdk+"/correctnesslease/pgfence:RowUpdater.Update")
	for i := range t {
		if err := t[i].parse(); err != nil {
			panic(err)
		}
	}
	return t
}

// Parse returns an entry of kind from "importpath:Name" or
// "importpath:Type.Name", as the -dualwrite.brokers and -dualwrite.commits
// flags take them.
func Parse(s string, kind Kind) (Entry, error) {
	e := Entry{Target: strings.TrimSpace(s), Kind: kind, TxParam: -1}
	return e, e.parse()
}

func (e *Entry) parse() error {
	bad := fmt.Errorf("dualwrite: %q: want importpath:Name or importpath:Type.Name", e.Target)
	pkg, rest, ok := strings.Cut(e.Target, ":")
	if !ok || pkg == "" || rest == "" {
		return bad
	}
	typ, name, hasType := strings.Cut(rest, ".")
	if !hasType {
		typ, name = "", rest
	}
	if name == "" || strings.Contains(name, ".") || (hasType && typ == "") {
		return bad
	}
	e.pkg, e.typ, e.name = pkg, typ, name
	return nil
}

// Matches reports whether fn is the entry's function or method.
func (e *Entry) Matches(fn *types.Func) bool {
	if fn.Name() != e.name || vetutil.FuncPkg(fn) != e.pkg {
		return false
	}
	return e.typ == "" || vetutil.RecvName(fn) == e.typ
}

// Table is the built-in table plus the entries added by flags or settings.
// Lookups are by function name first, so the table can grow without slowing
// every call.
type Table struct {
	byName map[string][]*Entry
	added  map[Kind][]string
	pkgs   map[string]bool // packages with entries, outside the SDK
}

// NewTable returns the built-in table.
func NewTable() *Table {
	t := &Table{byName: map[string][]*Entry{}, added: map[Kind][]string{}, pkgs: map[string]bool{}}
	for _, e := range Builtin() {
		t.insert(e)
	}
	return t
}

func (t *Table) insert(e Entry) {
	t.byName[e.name] = append(t.byName[e.name], &e)
	if !vetutil.IsSDK(e.pkg) {
		t.pkgs[e.pkg] = true
	}
}

// Add adds comma-separated entries of one kind.
func (t *Table) Add(kind Kind, list string) error {
	for _, part := range strings.Split(list, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		e, err := Parse(part, kind)
		if err != nil {
			return err
		}
		t.insert(e)
		t.added[kind] = append(t.added[kind], e.Target)
	}
	return nil
}

// Added returns the entries of kind added to the built-in table, comma-separated.
func (t *Table) Added(kind Kind) string { return strings.Join(t.added[kind], ",") }

// known reports whether the table has entries for package path: its calls are
// judged by the table alone, never by facts.
func (t *Table) known(path string) bool { return t.pkgs[path] }

// Lookup returns the entry for fn, or nil.
func (t *Table) Lookup(fn *types.Func) *Entry {
	for _, e := range t.byName[fn.Name()] {
		if e.Matches(fn) {
			return e
		}
	}
	return nil
}

// entriesNamed returns the entries of kind for methods or functions called
// name, for matching interfaces against broker clients.
func (t *Table) entriesNamed(name string, kind Kind) []*Entry {
	var out []*Entry
	for _, e := range t.byName[name] {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Markdown renders the built-in table for docs/vet.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| call | counts as | function argument run in the transaction |\n| --- | --- | --- |\n")
	for _, e := range Builtin() {
		tx := ""
		if e.TxParam >= 0 {
			tx = fmt.Sprintf("argument %d", e.TxParam+1)
		}
		kind := string(e.Kind)
		if e.Query {
			kind += " (constant INSERT/UPDATE/DELETE/MERGE SQL only)"
		} else if e.Kind == Write {
			kind += " (unless its SQL is a constant read)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Target, kind, tx)
	}
	return b.String()
}

// short names the entry as a user reads it: "kgo Client.ProduceSync".
func (e *Entry) short() string {
	name := e.name
	if e.typ != "" {
		name = e.typ + "." + name
	}
	return e.pkg[strings.LastIndex(e.pkg, "/")+1:] + " " + name
}
