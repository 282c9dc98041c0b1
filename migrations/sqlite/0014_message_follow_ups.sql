-- A message a channel can change after it was sent (a Slack message, a push notification) is brought up to date
-- once its question is resolved anywhere: Slack's message says how and by whom and loses its buttons, a push replaces
-- the notification. `reference` is what the channel calls the message (Slack's `channel:ts`), `followed_up_at` when
-- it was brought up to date (or given up on); until then, `next_attempt_at` is when the follow-up may be tried.
ALTER TABLE deliveries ADD COLUMN reference TEXT;
ALTER TABLE deliveries ADD COLUMN followed_up_at TEXT;
-- What the outbox's worker looks for once questions are resolved: sent messages not yet brought up to date.
CREATE INDEX deliveries_to_follow_up ON deliveries (next_attempt_at)
    WHERE status = 'sent' AND followed_up_at IS NULL AND channel <> 'email';
-- Who clicked a Slack button: the members a Slack user id is mapped to.
CREATE INDEX memberships_by_slack_user ON memberships (slack_user_id) WHERE slack_user_id IS NOT NULL;
