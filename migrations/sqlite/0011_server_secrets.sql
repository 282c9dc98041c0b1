-- Secrets the server makes for itself on first start and every instance must share: the key action links are signed
-- with, the VAPID key pair browsers subscribe to. The first instance to start inserts them; every other one, and every
-- restart, reads what is stored, so a link or a subscription made through one instance holds on all of them.
CREATE TABLE server_secrets (
    name        TEXT PRIMARY KEY NOT NULL,
    value       TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
