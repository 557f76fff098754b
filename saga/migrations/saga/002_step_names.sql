-- The names of a saga's steps, in order, as its definition declared them when it
-- started: the operator's view (Info.StepNames, coordctl's step timeline) shows
-- step i by name without the definition. Sagas started before this version keep
-- the empty array.
ALTER TABLE {{sagas}} ADD COLUMN step_names text[] NOT NULL DEFAULT '{}';
