-- Status groups the parked events by key with their oldest parking time: with
-- (aggregateid, parked_at) the grouping reads the index alone, in key order,
-- instead of hashing every row of the dead-letter table.
CREATE INDEX {{idx_dead_key_time}} ON {{dead}} (aggregateid, parked_at);
