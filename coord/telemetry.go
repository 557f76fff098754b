package coord

// InstrumentationName is the name every coordkit package passes to
// otel.Meter/otel.Tracer (with its own package path appended where useful).
const InstrumentationName = "github.com/coordkit/coordkit"

// Metric names. One place, so dashboards, alerts (deploy/) and code agree.
const (
	// correctnesslease and pgfence
	MetricFenceRejected     = "coord.fence.rejected"          // counter: stale tokens rejected by a resource
	MetricLeaseAcquisitions = "coord.lease.acquisitions"      // counter
	MetricLeaseStepDowns    = "coord.lease.step_downs"        // counter, attr reason
	MetricLeaseRenewLatency = "coord.lease.renew_latency_ms"  // histogram
	MetricLeaseHeldSeconds  = "coord.lease.held_seconds"      // histogram: time as holder
	MetricLeaderChanges     = "coord.leader.changes"          // counter
	MetricKeepaliveRPCs     = "coord.session.keepalive_calls" // counter

	// efficiencylock
	MetricLockAcquisitions    = "efficiencylock.acquisitions"     // counter
	MetricLockAttempts        = "efficiencylock.attempts"         // histogram: attempts per acquisition
	MetricLockRefreshFailures = "efficiencylock.refresh_failures" // counter
	MetricLockLost            = "efficiencylock.lost"             // counter

	// idempotency
	MetricIdemExecutions = "idempotency.executions"          // counter
	MetricIdemReplays    = "idempotency.replays"             // counter
	MetricIdemConflicts  = "idempotency.conflicts"           // counter: 409
	MetricIdemMismatches = "idempotency.mismatches"          // counter: 422
	MetricIdemInFlight   = "idempotency.in_flight_age_ms"    // histogram
	MetricIdemRecoveries = "idempotency.completer.recovered" // counter

	// outbox
	MetricOutboxPublishLag   = "outbox.publish_lag_ms"         // histogram: created → published
	MetricOutboxOldestAge    = "outbox.oldest_unpublished_age" // gauge, seconds
	MetricOutboxPublished    = "outbox.published"              // counter
	MetricOutboxRetries      = "outbox.retries"                // counter
	MetricOutboxParked       = "outbox.parked"                 // counter
	MetricInboxDuplicates    = "outbox.inbox.duplicates"       // counter
	MetricOutboxEnqueueError = "outbox.enqueue.rejected"       // counter

	// outbox consumers (natsjs, kafka), attr outbox.consumer
	MetricConsumerProcessed    = "outbox.consumer.processed"        // counter: effects committed
	MetricConsumerRedeliveries = "outbox.consumer.redeliveries"     // counter: deliveries after the first
	MetricConsumerFailures     = "outbox.consumer.handler_failures" // counter
	MetricConsumerDeadLettered = "outbox.consumer.dead_lettered"    // counter: messages given up

	// saga
	MetricSagaStateAge            = "saga.state_age_seconds"     // gauge: oldest non-terminal, attrs type+state
	MetricSagaCompensationFailure = "saga.compensation_failures" // counter
	MetricSagaSteps               = "saga.steps"                 // counter
	MetricSagaRetries             = "saga.retries"               // counter

	// failstatic
	MetricClientStaleness  = "coord.client.staleness_seconds"  // gauge
	MetricConfigRejected   = "failstatic.rejected_snapshots"   // counter
	MetricConfigReconnects = "failstatic.reconnects"           // counter
	MetricConfigRelists    = "failstatic.relists"              // counter
	MetricConfigCoalesced  = "failstatic.subscriber_coalesced" // counter: snapshots merged for a slow subscriber

	// quotas
	MetricQuotaRejected = "coord.quota.rejected" // counter, attrs tenant+quota
)

// Metric names of membership.
const (
	MetricMemberRegistered = "coord.membership.registered"    // gauge 0/1 per instance, attrs tenant+service+instance
	MetricMemberLosses     = "coord.membership.losses"        // counter: registrations lost, attrs tenant+service+reason
	MetricMemberRecoveryMs = "coord.membership.reregister_ms" // histogram: loss noticed → registered again
	MetricMemberCount      = "coord.membership.members"       // gauge: members in a watcher's view, attrs tenant+service
	MetricMemberResumes    = "coord.membership.watch_resumes" // counter: watches resumed from the last revision
	MetricMemberRelists    = "coord.membership.relists"       // counter: re-lists after compaction
)

// Metric names of ownership. Every one carries the tenant and group attributes;
// the per-member ones also AttrOwnershipMember.
const (
	MetricOwnershipOwned    = "coord.ownership.owned"         // gauge: partitions this member holds, attr member
	MetricOwnershipUnowned  = "coord.ownership.unowned"       // gauge: partitions the target gives this member that it does not hold yet (sum over members = unowned partitions of the group)
	MetricOwnershipMoves    = "coord.ownership.moves"         // counter: partitions this member gave up, attr reason (rebalance, leave, session_lost, key_lost, closed)
	MetricOwnershipHandoff  = "coord.ownership.handoff_ms"    // histogram: partition assigned to this member → held by it (planned handoff and takeover alike)
	MetricOwnershipRetarget = "coord.ownership.target_writes" // counter: assignment targets written by this member (0 in steady state)
)

// Metric names of schedule. Every one carries the tenant and AttrScheduleJob.
const (
	MetricScheduleFires      = "schedule.fires"                    // counter: fire (or batch) transactions committed, attr outcome (ok, running, failed, missed)
	MetricScheduleLag        = "schedule.fire_lag_ms"              // histogram: nominal time → commit of a scheduled fire's (first) transaction
	MetricScheduleMissed     = "schedule.missed"                   // counter: fires that will not run, attr reason (window, limit, superseded, skipped, overlap, dst_gap, paused, operator)
	MetricScheduleDuplicates = "schedule.duplicates_rejected"      // counter: fire attempts refused, attr reason (fence: a stale token; key: the identity was already recorded)
	MetricScheduleSuccessAge = "schedule.last_success_age_seconds" // gauge: age of each owned job's last successful fire
)

// Attribute keys used on metrics and spans.
const (
	AttrLease    = "coord.lease"
	AttrTenant   = "coord.tenant"
	AttrReason   = "coord.reason"
	AttrQuota    = "coord.quota"
	AttrTopic    = "outbox.topic"
	AttrConsumer = "outbox.consumer"
	AttrSaga     = "saga.type"
	AttrState    = "saga.state"
	AttrStep     = "saga.step"
	AttrLockWhy  = "efficiencylock.reason"
	AttrOutcome  = "coord.outcome"
)

// Attribute keys of ownership.
const (
	AttrOwnershipGroup  = "ownership.group"
	AttrOwnershipMember = "ownership.member"
)

// Attribute keys of schedule.
const (
	AttrScheduleJob = "schedule.job"
)

// Attribute keys of membership.
const (
	AttrService  = "membership.service"
	AttrInstance = "membership.instance"
)
