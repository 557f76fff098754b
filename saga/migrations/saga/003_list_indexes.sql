-- The operator's list (SagaList, coordctl): keyset pages in (state_since, id)
-- order, over every state or over one. A step write changes neither column, so
-- step writes stay HOT updates.
CREATE INDEX {{list_idx}} ON {{sagas}} (state_since, id);
CREATE INDEX {{state_list_idx}} ON {{sagas}} (state, state_since, id);
