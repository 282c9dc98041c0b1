-- Where a member is reached outside Holdpoint (spec §11): an email address, a Slack user id, and per channel the
-- lowest urgency that reaches them (JSON, as `PUT /me/notifications` takes it; NULL = the defaults). Kept per
-- membership, so nothing one workspace's admin sets reaches into another workspace.
ALTER TABLE memberships ADD COLUMN email TEXT;
ALTER TABLE memberships ADD COLUMN slack_user_id TEXT;
ALTER TABLE memberships ADD COLUMN notifications TEXT;
