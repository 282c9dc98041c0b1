-- Delegation while away (spec §14): until `away_until`, the questions assigned to a member go to `delegate_id`, a
-- member of the same workspace. Both are set together and cleared together.
ALTER TABLE memberships ADD COLUMN away_until TEXT;
ALTER TABLE memberships ADD COLUMN delegate_id BLOB REFERENCES users (id);
