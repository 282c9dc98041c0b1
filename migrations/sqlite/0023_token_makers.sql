-- Tokens belong to a person (spec §14, many hands): `maker_id` is the account that made a token, whose approvals and
-- claims the token's count as. A token the operator made (the bootstrap token, `holdpoint token create`, the embedded
-- engine) has none: a service identity, which never counts toward a quorum of people.
ALTER TABLE tokens ADD COLUMN maker_id BLOB REFERENCES users (id);
-- A token stored without one names its maker in `created_by`; only an admin makes tokens, so its maker is the admin
-- of the token's workspace of that name, if there is one.
UPDATE tokens SET maker_id = (
    SELECT u.id FROM users u JOIN memberships m ON m.user_id = u.id
    WHERE u.username = tokens.created_by AND m.workspace_id = tokens.workspace_id AND m.role = 'admin'
);

-- Who holds a question's claim, by id: a person (their account, or the maker of the token that claimed), or a service
-- token itself. `claimed_by` keeps the name shown. Claims last minutes; those held by name alone are let go rather
-- than matched to whoever has the name.
ALTER TABLE questions ADD COLUMN claimed_by_id BLOB;
UPDATE questions SET claimed_by = NULL, claim_expires_at = NULL WHERE claimed_by IS NOT NULL;
