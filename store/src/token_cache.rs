//! The API tokens this instance has recently seen valid, so that an agent's every request does not read the
//! database to learn who it is (three reads of a full question-and-answer cycle).
//!
//! A token row never changes but for its revocation, which is what the cache must never outlive:
//!
//! - A revocation made through this instance forgets every entry once its transaction has committed.
//! - On PostgreSQL, a revocation through another instance reaches this one by `NOTIFY` (delivered on commit), and
//!   forgets every entry here too. The cache serves nothing while that notification channel is not listening (at
//!   start, and from a lost connection until the listener is back), since a revocation meanwhile would go unheard.
//! - A lookup that read the database before a revocation was heard must not store what it read afterwards: each
//!   forgetting starts a new generation, and an entry read in an older one is dropped.
//! - Whatever else changes the database behind the server's back (a script on the SQLite file, say) is seen once an
//!   entry is [`TTL`] old.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Principal;

/// How long an entry is trusted without a look at the database by default (`HOLDPOINT_TOKEN_CACHE_SECONDS`): the
/// bound on how stale a token can be whatever changed it.
pub const TTL: Duration = Duration::from_secs(5);
/// Beyond this many live tokens the cache starts over: memory stays bounded however many tokens are presented.
const CAPACITY: usize = 10_000;

/// See the module's documentation.
#[derive(Debug)]
pub struct TokenCache {
    inner: Mutex<Inner>,
    ttl: Duration,
    /// Counts the credential changes heard (revocations, removed members, here or elsewhere), so that what holds a
    /// caller for long (event streams, MCP sessions) checks it again.
    changes: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug)]
struct Inner {
    /// Raised by every forgetting; an entry read in an older generation is not stored.
    generation: u64,
    /// Whether revocations elsewhere are heard (always on SQLite: nobody else revokes).
    listening: bool,
    entries: HashMap<Vec<u8>, (Principal, Instant)>,
}

/// Where a lookup started: pass it back to [`TokenCache::remember`] with what the database said.
#[derive(Debug, Clone, Copy)]
pub struct Generation(u64);

impl TokenCache {
    /// A cache that serves entries for `ttl` (none if zero), at once (`listening`) or only once
    /// [`TokenCache::listening`] says it may.
    pub fn new(listening: bool, ttl: Duration) -> Self {
        let inner = Inner { generation: 0, listening, entries: HashMap::new() };
        Self { inner: Mutex::new(inner), ttl, changes: tokio::sync::watch::Sender::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves nothing half-done that matters: at worst an entry is missing.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The principal of a token seen valid less than a TTL ago, unless revocations could go unheard now.
    pub fn get(&self, secret_hash: &[u8]) -> Option<Principal> {
        let inner = self.lock();
        if !inner.listening {
            return None;
        }
        let (principal, seen) = inner.entries.get(secret_hash)?;
        (seen.elapsed() < self.ttl).then(|| principal.clone())
    }

    /// Taken before reading the database for a token.
    pub fn generation(&self) -> Generation {
        Generation(self.lock().generation)
    }

    /// Stores what the database said of a token, unless a revocation was heard since `read_in` was taken.
    pub fn remember(&self, secret_hash: &[u8], principal: &Principal, read_in: Generation) {
        let mut inner = self.lock();
        if !inner.listening || inner.generation != read_in.0 || self.ttl.is_zero() {
            return;
        }
        if inner.entries.len() >= CAPACITY {
            inner.entries.clear();
        }
        inner.entries.insert(secret_hash.to_vec(), (principal.clone(), Instant::now()));
    }

    /// A credential was revoked (here or elsewhere): every entry goes, and the holders of long requests are told.
    pub fn forget_all(&self) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.clear();
        drop(inner);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Changes whenever a credential may have been revoked.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether revocations elsewhere are heard from now on; either way, what was stored before is forgotten.
    pub fn listening(&self, listening: bool) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.clear();
        inner.listening = listening;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrincipalKind;
    use holdpoint_types::Role;
    use uuid::Uuid;

    fn principal(name: &str) -> Principal {
        Principal {
            id: Uuid::now_v7(),
            kind: PrincipalKind::Token,
            workspace_id: Uuid::now_v7(),
            workspace: "default".into(),
            name: name.into(),
            role: Role::Agent,
            person: None,
        }
    }

    #[test]
    fn a_token_read_once_is_served_from_memory_until_a_revocation_is_heard() {
        let cache = TokenCache::new(true, TTL);
        let ci = principal("ci");
        assert_eq!(cache.get(b"hash"), None);
        cache.remember(b"hash", &ci, cache.generation());
        assert_eq!(cache.get(b"hash"), Some(ci));
        assert_eq!(cache.get(b"other"), None);
        cache.forget_all();
        assert_eq!(cache.get(b"hash"), None);
    }

    #[test]
    fn a_read_that_began_before_a_revocation_is_not_stored_after_it() {
        let cache = TokenCache::new(true, TTL);
        let before = cache.generation();
        cache.forget_all();
        cache.remember(b"hash", &principal("ci"), before);
        assert_eq!(cache.get(b"hash"), None, "the token may be the one just revoked");
        cache.remember(b"hash", &principal("ci"), cache.generation());
        assert!(cache.get(b"hash").is_some());
    }

    #[test]
    fn nothing_is_served_while_revocations_elsewhere_could_go_unheard() {
        let cache = TokenCache::new(false, TTL);
        cache.remember(b"hash", &principal("ci"), cache.generation());
        assert_eq!(cache.get(b"hash"), None);
        cache.listening(true);
        cache.remember(b"hash", &principal("ci"), cache.generation());
        assert!(cache.get(b"hash").is_some());
        cache.listening(false);
        assert_eq!(cache.get(b"hash"), None, "a lost listener forgets and stops serving");
        cache.listening(true);
        assert_eq!(cache.get(b"hash"), None, "what was stored before the loss stays forgotten");
    }

    #[test]
    fn an_entry_older_than_its_ttl_is_read_again() {
        let cache = TokenCache::new(true, Duration::from_millis(20));
        cache.remember(b"hash", &principal("ci"), cache.generation());
        assert!(cache.get(b"hash").is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(cache.get(b"hash"), None);
    }

    #[test]
    fn a_ttl_of_zero_reads_every_time() {
        let cache = TokenCache::new(true, Duration::ZERO);
        cache.remember(b"hash", &principal("ci"), cache.generation());
        assert_eq!(cache.get(b"hash"), None);
    }

    #[test]
    fn the_cache_starts_over_when_full() {
        let cache = TokenCache::new(true, TTL);
        for n in 0..CAPACITY {
            cache.remember(&n.to_le_bytes(), &principal("many"), cache.generation());
        }
        assert!(cache.get(&0usize.to_le_bytes()).is_some());
        cache.remember(b"one more", &principal("late"), cache.generation());
        assert_eq!(cache.get(&0usize.to_le_bytes()), None);
        assert!(cache.get(b"one more").is_some());
    }
}
