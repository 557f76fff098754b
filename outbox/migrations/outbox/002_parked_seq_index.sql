-- The operator's list of parked events (ParkedList, coordctl) pages in outbox
-- order: keyset pages over seq. Parked rows are written once and deleted once.
CREATE INDEX {{idx_dead_seq}} ON {{dead}} (seq);
