package view

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

func fence(n int64) string {
	if n < 0 {
		return "?"
	}
	return itoa(n)
}

func ttl(n int64) string {
	if n < 0 {
		return "expired"
	}
	return itoa(n) + "s"
}

// Leases is `leases list`.
func Leases(ls []admin.Lease) Doc {
	s := Section{Header: []string{"TENANT", "NAME", "HOLDER", "LEASE ID", "TOKEN", "SINCE", "TTL", "WAITERS", "FENCE"},
		Empty: "no leases held or waited for"}
	for _, l := range ls {
		holder, id, token, since, t := "(none)", "-", "-", "-", "-"
		if l.Held {
			holder, id, token, since, t = l.Holder, l.HolderLeaseID, itoa(l.SinceRevision), "rev "+itoa(l.SinceRevision), ttl(l.TTLSeconds)
		}
		s.Rows = append(s.Rows, []string{l.Tenant, l.Name, holder, id, token, since, t, itoa(l.Waiters), fence(l.FenceHighest)})
	}
	return Doc{s}
}

// Lease is `leases get`.
func Lease(l admin.Lease) Doc {
	fields := Section{Fields: [][2]string{{"Lease", l.Lease}, {"Held", yes(l.Held)}}}
	if l.Held {
		fields.Fields = append(fields.Fields, [][2]string{{"Holder", l.Holder}, {"Holder lease ID", l.HolderLeaseID},
			{"Token", l.Token}, {"Since", "revision " + itoa(l.SinceRevision)}, {"TTL left", ttl(l.TTLSeconds)}}...)
	}
	fields.Fields = append(fields.Fields, [][2]string{{"Waiters", itoa(l.Waiters)}, {"Fence highest", fence(l.FenceHighest)},
		{"Read at revision", itoa(l.Revision)}}...)
	if l.Held && l.FenceHighest > l.SinceRevision {
		fields.Fields = append(fields.Fields, [2]string{"Warning", "the fence recorded a newer token than the holder's: its fenced writes are rejected"})
	}
	q := Section{Title: "QUEUE", Header: []string{"POS", "KEY", "LEASE ID", "SESSION", "CREATE REV", "TTL"}, Empty: "(empty queue)"}
	for _, e := range l.Queue {
		q.Rows = append(q.Rows, []string{itoa(e.Position), e.Key, e.LeaseID, e.Session, itoa(e.CreateRevision), ttl(e.TTLSeconds)})
	}
	return Doc{fields, q}
}

// Members is `members`: one section per service.
func Members(ss []admin.Service) Doc {
	if len(ss) == 0 {
		return Doc{{Header: []string{"TENANT", "SERVICE"}, Empty: "no members registered"}}
	}
	var d Doc
	for _, x := range ss {
		s := Section{Title: fmt.Sprintf("%s/%s (%s, revision %d)", x.Tenant, x.Service, count(len(x.Members), "member"), x.Revision),
			Header: []string{"INSTANCE", "ADDRESS", "METADATA", "LEASE ID", "SINCE", "MOD REV"}, Empty: "(no members)"}
		for _, m := range x.Members {
			s.Rows = append(s.Rows, []string{m.Instance, m.Addr, Metadata(m.Metadata), m.LeaseID, "rev " + itoa(m.SinceRevision), itoa(m.ModRevision)})
		}
		d = append(d, s)
		if len(x.Malformed) > 0 {
			bad := Section{Title: "NOT MEMBER RECORDS", Header: []string{"KEY"}}
			for _, k := range x.Malformed {
				bad.Rows = append(bad.Rows, []string{k})
			}
			d = append(d, bad)
		}
	}
	return d
}

// count is "1 member", "2 members".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return itoa(n) + " " + noun + "s"
}

// Ownership is `ownership map`: per group its figures, members and partitions.
func Ownership(ms []admin.OwnershipMap) Doc {
	if len(ms) == 0 {
		return Doc{{Header: []string{"TENANT", "GROUP"}, Empty: "no ownership groups"}}
	}
	var d Doc
	for _, m := range ms {
		d = append(d, Section{Title: m.Tenant + "/" + m.Group, Fields: [][2]string{{"Partitions", itoa(m.Partitions)},
			{"Members", itoa(len(m.Members))}, {"Unowned", itoa(m.Unowned)}, {"Moving", itoa(m.Moving)},
			{"Target revision", itoa(m.TargetRevision)}, {"Read at revision", itoa(m.Revision)}}})
		ms := Section{Title: "MEMBERS", Header: []string{"ID", "OWNS", "METADATA"}, Empty: "(no members)"}
		for _, x := range m.Members {
			ms.Rows = append(ms.Rows, []string{x.ID, itoa(x.Owns), Metadata(x.Metadata)})
		}
		ps := Section{Title: "PARTITIONS", Header: []string{"PARTITION", "OWNER", "TARGET", "TOKEN", "SINCE", "WAITING"}, Empty: "(no target written)"}
		for _, p := range m.Owners {
			owner, token, since := "(unowned)", "-", "-"
			if p.Owner != "" {
				owner, token, since = p.Owner, p.Token, "rev "+itoa(p.SinceRevision)
			}
			ps.Rows = append(ps.Rows, []string{itoa(p.Partition), owner, p.Target, token, since, itoa(p.Waiting)})
		}
		d = append(d, ms, ps)
	}
	return d
}

// Metadata formats a member's metadata as k=v pairs sorted by key.
func Metadata(md map[string]string) string {
	pairs := make([]string, 0, len(md))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		pairs = append(pairs, k+"="+md[k])
	}
	return strings.Join(pairs, " ")
}

// Fences is `fences list`.
func Fences(fs []admin.Fence) Doc {
	s := Section{Header: []string{"LEASE", "HIGHEST", "UPDATED"}, Empty: "no fence rows"}
	for _, f := range fs {
		s.Rows = append(s.Rows, []string{f.Lease, itoa(f.Highest), TS(f.UpdatedAt)})
	}
	return Doc{s}
}

// Fence is `fences get`.
func Fence(f admin.Fence) Doc {
	highest := itoa(f.Highest)
	if f.Highest == 0 {
		highest = "0 (no row: any token is accepted)"
	}
	fields := Section{Fields: [][2]string{{"Lease", f.Lease}, {"Highest", highest}, {"Updated", TS(f.UpdatedAt)}, {"Version", f.Version}}}
	r := Section{Title: "RESETS", Header: []string{"ID", "AT", "ACTOR", "BEFORE", "AFTER", "REASON"}, Empty: "(never reset)"}
	for _, x := range f.Resets {
		r.Rows = append(r.Rows, []string{itoa(x.ID), TS(x.At), x.Actor, itoa(x.Before), itoa(x.After), x.Reason})
	}
	return Doc{fields, r}
}

// OutboxStatus is `outbox status`.
func OutboxStatus(s admin.OutboxStatus) Doc {
	fields := Section{Fields: [][2]string{
		{"Pending", itoa(s.Pending)},
		{"Oldest pending", Age(s.OldestPendingAgeSeconds)},
		{"Publish lag p99", fmt.Sprintf("%s (%d published in the last %s)", Age(s.PublishLagP99Seconds), s.PublishedInWindow, Age(s.WindowSeconds))},
		{"Parked", itoa(s.Parked)},
	}}
	k := Section{Title: "PARKED KEYS", Header: []string{"KEY", "PARKED", "BLOCKED", "PARKED AT"}, Empty: "(no parked key)"}
	for _, p := range s.ParkedKeys {
		k.Rows = append(k.Rows, []string{p.Key, itoa(p.Parked), itoa(p.Blocked), TS(p.ParkedAt)})
	}
	return Doc{fields, k}
}

// Parked is `outbox parked list`.
func Parked(ps []admin.ParkedEvent) Doc {
	s := Section{Header: []string{"ID", "KEY", "TOPIC", "TYPE", "ATTEMPTS", "PARKED AT", "VERSION", "LAST ERROR"}, Empty: "no parked events"}
	for _, p := range ps {
		s.Rows = append(s.Rows, []string{p.ID, p.Key, p.Topic, p.Type, itoa(p.Attempts), TS(p.ParkedAt), p.Version, p.LastError})
	}
	return Doc{s}
}

// ParkedEvent is one parked event (a mutation's before).
func ParkedEvent(p admin.ParkedEvent) Doc {
	return Doc{{Fields: [][2]string{{"ID", p.ID}, {"Key", p.Key}, {"Topic", p.Topic}, {"Type", p.Type}, {"Attempts", itoa(p.Attempts)},
		{"Last error", p.LastError}, {"Created", TS(p.CreatedAt)}, {"Parked", TS(p.ParkedAt)}, {"Payload", fmt.Sprintf("%d bytes", p.PayloadBytes)},
		{"Version", p.Version}}}}
}

// ParkedOutcome is what became of a parked event a change acted on (a
// mutation's after).
func ParkedOutcome(p admin.ParkedOutcome) Doc {
	now := "deleted (discarded)"
	if p.Requeued {
		now = "back in the outbox at its original position: its key flows again"
	}
	return Doc{{Fields: [][2]string{{"ID", p.ID}, {"Parked", map[bool]string{true: "yes", false: "no"}[p.Parked]}, {"Now", now}}}}
}

// Sagas is `saga list`.
func Sagas(ss []admin.Saga) Doc {
	s := Section{Header: []string{"ID", "TYPE", "STATE", "STEP", "ATTEMPTS", "AGE", "NEXT ATTEMPT", "VERSION", "LAST ERROR"}, Empty: "no sagas"}
	for _, x := range ss {
		s.Rows = append(s.Rows, []string{x.ID, x.Type, x.State, step(x), itoa(x.Attempts), Age(x.AgeSeconds), nextAttempt(x), x.Version, x.LastError})
	}
	return Doc{s}
}

func step(x admin.Saga) string {
	s := fmt.Sprintf("%d/%d", x.Step, x.StepCount)
	if x.StepName != "" {
		s += " " + x.StepName
	}
	return s
}

func nextAttempt(x admin.Saga) string {
	if x.State != "running" && x.State != "compensating" {
		return "-"
	}
	return TS(x.NextAttemptAt)
}

// Saga is `saga get`.
func Saga(x admin.Saga) Doc {
	fields := Section{Fields: [][2]string{{"ID", x.ID}, {"Type", x.Type}, {"State", x.State}, {"Step", step(x)},
		{"Pivot", itoa(x.PivotStep)}, {"Attempts", itoa(x.Attempts)}, {"In state for", Age(x.AgeSeconds)},
		{"Next attempt", nextAttempt(x)}, {"Last error", x.LastError}, {"Failure", x.Failure}, {"Claimed by", x.ClaimOwner},
		{"Created", TS(x.CreatedAt)}, {"Updated", TS(x.UpdatedAt)}, {"Pivot at", TSp(x.PivotAt)}, {"Version", x.Version}}}
	steps := Section{Title: "STEPS", Header: []string{"#", "NAME", "KIND", "STATUS", "FAILURES", "LAST ERROR"}}
	for _, s := range x.Steps {
		steps.Rows = append(steps.Rows, []string{itoa(s.Index), s.Name, s.Kind, s.Status, itoa(s.Failures), s.LastError})
	}
	errs := Section{Title: "ERRORS", Header: []string{"AT", "STEP", "ERROR"}, Empty: "(no errors)"}
	for _, e := range slices.Backward(x.Errors) {
		errs.Rows = append(errs.Rows, []string{TS(e.At), e.Step, e.Error})
	}
	return Doc{fields, steps, errs}
}

// SagaSummaries is part of `overview`.
func SagaSummaries(ss []admin.SagaSummary) Section {
	s := Section{Title: "SAGAS (NOT FINISHED)", Header: []string{"TYPE", "STATE", "COUNT", "OLDEST"}, Empty: "(none running, compensating or waiting for a human)"}
	for _, x := range ss {
		s.Rows = append(s.Rows, []string{x.Type, x.State, itoa(x.Count), Age(x.OldestAgeSeconds)})
	}
	return s
}

// Overview is `overview`. A figure that could not be read says so, with the
// part's error, instead of a zero.
func Overview(o admin.Overview) Doc {
	unknown := func(part string) string { return "UNKNOWN (" + part + " could not be read: " + o.Errors[part] + ")" }
	num := func(p *int, part string) string {
		if p == nil {
			return unknown(part)
		}
		return itoa(*p)
	}
	rej := "- (" + o.FenceRejectionsSource + ")"
	switch {
	case o.FenceRejectionsLastHour != nil:
		rej = fmt.Sprintf("%g", *o.FenceRejectionsLastHour)
	case o.Errors["fence_rejections"] != "":
		rej = unknown("fence_rejections")
	}
	members := unknown("members")
	if o.Members != nil && o.Services != nil {
		members = count(*o.Members, "member") + " in " + count(*o.Services, "service")
	}
	needsHuman := unknown("sagas")
	if o.NeedsHuman != nil {
		needsHuman = itoa(*o.NeedsHuman)
	}
	fields := Section{Fields: [][2]string{{"Leases held", num(o.LeasesHeld, "leases")}, {"Waiting", num(o.LeasesWaiting, "leases")},
		{"Members", members}, {"Fence rejections (1h)", rej}, {"Needs a human", needsHuman}}}
	if o.Outbox != nil {
		fields.Fields = append(fields.Fields, [][2]string{{"Outbox pending", itoa(o.Outbox.Pending)},
			{"Outbox oldest pending", Age(o.Outbox.OldestPendingAgeSeconds)}, {"Outbox lag p99", Age(o.Outbox.PublishLagP99Seconds)},
			{"Outbox parked", itoa(o.Outbox.Parked)}}...)
	} else {
		fields.Fields = append(fields.Fields, [2]string{"Outbox", unknown("outbox")})
	}
	sagas := SagaSummaries(o.Sagas)
	if o.Sagas == nil && o.Errors["sagas"] != "" {
		sagas.Empty = unknown("sagas")
	}
	return withUnavailable(Doc{fields, sagas}, o.Errors)
}

// withUnavailable is doc with, when a part could not be read, a section of
// those parts and their errors.
func withUnavailable(doc Doc, errs map[string]string) Doc {
	if len(errs) == 0 {
		return doc
	}
	e := Section{Title: "UNAVAILABLE", Header: []string{"PART", "ERROR"}}
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		e.Rows = append(e.Rows, []string{k, errs[k]})
	}
	return append(doc, e)
}

// Idem is `idem get`.
func Idem(k admin.IdemKey) Doc {
	var headers []string
	for _, name := range slices.Sorted(maps.Keys(k.ResponseHeader)) {
		headers = append(headers, name+": "+strings.Join(k.ResponseHeader[name], ", "))
	}
	h := strings.Join(headers, "; ")
	op := k.Operation
	if op == "" {
		op = "(one-shot)"
	}
	expires := "-"
	if !k.ExpiresAt.IsZero() {
		expires = TS(k.ExpiresAt)
	}
	return Doc{{Fields: [][2]string{{"Scope", k.Scope}, {"Key", k.Key}, {"State", k.State}, {"Operation", op},
		{"Recovery point", k.RecoveryPoint}, {"Locked until", TSp(k.LockedUntil)}, {"Fingerprint", k.Fingerprint},
		{"Response status", itoa(k.ResponseStatus)}, {"Response headers", h}, {"Response body", itoa(k.ResponseBytes) + " bytes"},
		{"Created", TS(k.CreatedAt)}, {"Completed", TSp(k.CompletedAt)}, {"Expires", expires}}}}
}

// Config is `config get`.
func Config(c admin.ConfigRead) Doc {
	s := Section{Title: "AT REVISION " + itoa(c.Revision), Header: []string{"KEY", "MOD REV", "VERSION", "BYTES", "VALUE"}, Empty: "no such key"}
	for _, e := range c.Entries {
		v := e.Value
		if e.Encoding != "utf-8" {
			v = e.Encoding + ":" + v
		}
		s.Rows = append(s.Rows, []string{e.Key, itoa(e.ModRevision), itoa(e.Version), itoa(e.Bytes), v})
	}
	return Doc{s}
}

// Staleness is `config staleness`.
func Staleness(s admin.Staleness) Doc {
	etcd, behind := "not read (no --endpoints)", "unknown"
	if s.EtcdModRevision >= 0 {
		etcd, behind = fmt.Sprintf("newest mod revision %d, %d keys", s.EtcdModRevision, s.EtcdKeys), yes(s.Behind)
	}
	return Doc{{Fields: [][2]string{{"State file", s.Path}, {"Watches", s.Watched}, {"Prefix", yes(s.Prefix)},
		{"Snapshot revision", itoa(s.Revision)}, {"Keys", itoa(s.Keys)}, {"Last confirmed", TS(s.Confirmed)},
		{"Staleness", Age(s.StalenessSeconds)}, {"etcd now", etcd}, {"Behind etcd", behind}}}}
}

// Audit is `audit list`.
func Audit(es []admin.AuditEntry) Doc {
	s := Section{Header: []string{"ID", "AT", "ACTOR", "VIA", "ACTION", "TARGET", "OUTCOME", "REASON"}, Empty: "no audit rows"}
	for _, e := range es {
		s.Rows = append(s.Rows, []string{itoa(e.ID), TS(e.At), e.Actor, e.Via, e.Action, e.Target, e.Outcome, e.Reason})
	}
	return Doc{s}
}

// Change is what a mutation did or would do.
func Change(c admin.Change, before, after Doc) Doc {
	what := "applied"
	if c.DryRun {
		what = "dry run: nothing changed, no audit row written"
	}
	head := Section{Fields: [][2]string{{"Action", c.Action}, {"Target", c.Target}, {"Result", what}}}
	if !c.DryRun {
		head.Fields = append(head.Fields, [2]string{"Audit row", itoa(c.AuditID) + " at " + TS(c.At)})
	}
	doc := Doc{head}
	for _, s := range before {
		s.Title = strings.TrimSpace("BEFORE " + s.Title)
		doc = append(doc, s)
	}
	for _, s := range after {
		s.Title = strings.TrimSpace("AFTER " + s.Title)
		doc = append(doc, s)
	}
	return doc
}
