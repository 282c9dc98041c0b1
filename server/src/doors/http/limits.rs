//! Abuse limits: rate limits on creation, sign-in and failed authentication, the client address they are keyed on,
//! and request body sizes.
//!
//! Rate limits are GCRA limiters from `governor`, keyed per token, per client address and per account name (failed
//! authentications have a GCRA of their own, [`FailureLimiter`], as only failures count). Their
//! state is this process's memory: every instance counts on its own, so behind a load balancer with `n` instances a
//! client may get up to `n` times a limit (see docs/decisions.md, "Limits and headers"). Idle keys are swept every
//! minute (`retain_recent`), so a flood of distinct keys cannot grow the maps without bound.
//!
//! The client address is the socket peer (`ConnectInfo`), or, when `HOLDPOINT_TRUST_PROXY_HEADERS` is set and the
//! peer is a trusted proxy, the rightmost untrusted address of `X-Forwarded-For`. Requests without `ConnectInfo`
//! (tests through `oneshot`, the CLI's embedded engine) count as loopback; tests that need another address insert
//! `axum::extract::ConnectInfo(SocketAddr)` into the request's extensions, as `into_make_service_with_connect_info`
//! does for real connections.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::{
    body::{Body, HttpBody as _},
    extract::{ConnectInfo, FromRequestParts, Request, State},
    http::{HeaderMap, Method, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use governor::{
    Quota, RateLimiter,
    clock::{Clock, DefaultClock},
    state::keyed::DefaultKeyedStateStore,
};
use http_body_util::BodyExt as _;
use sha2::{Digest, Sha256};

use crate::config::LimitsConfig;
use crate::doors::auth::SESSION_COOKIE;
use crate::error::AppError;

/// The largest body `/auth/*` reads: a sign-in form is a few hundred bytes; 16 KiB leaves room for a long `next`.
pub const AUTH_BODY_LIMIT: usize = 16 * 1024;

/// The `POST` endpoints that create something, limited per token and per client address.
const CREATION_PATHS: [&str; 5] = [
    "/api/v1/questions",
    "/api/v1/questions/answer-batch",
    "/api/v1/runs",
    "/api/v1/agents",
    super::files::UPLOAD_PATH,
];

/// How often idle keys are dropped from the limiters.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A limiter with one GCRA state per key.
type KeyedLimiter<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock>;

/// A credential, account name or the like, reduced to a fixed size so that long values cost no more memory than
/// short ones and no secret is kept in the limiter's map.
type Digest32 = [u8; 32];

/// The rate limiters of one server instance.
pub struct RateLimits {
    config: LimitsConfig,
    create_per_token: KeyedLimiter<Digest32>,
    create_per_ip: KeyedLimiter<IpAddr>,
    sign_in_per_ip: KeyedLimiter<IpAddr>,
    sign_in_per_account: KeyedLimiter<Digest32>,
    auth_failures_per_ip: FailureLimiter,
}

impl RateLimits {
    /// Limiters as `config` says, with a background sweep of idle keys when a Tokio runtime is running (the sweep
    /// ends when the limiters are dropped).
    pub fn new(config: &LimitsConfig) -> Arc<Self> {
        let create_per_token = per_second(config.create_rate_burst, config.create_rate_per_second);
        let create_per_ip = per_second(config.create_ip_rate_burst, config.create_ip_rate_per_second);
        let sign_in = per_window(config.signin_rate_attempts, config.signin_rate_window_seconds);
        let limits = Arc::new(RateLimits {
            config: config.clone(),
            create_per_token: RateLimiter::keyed(create_per_token),
            create_per_ip: RateLimiter::keyed(create_per_ip),
            sign_in_per_ip: RateLimiter::keyed(sign_in),
            sign_in_per_account: RateLimiter::keyed(sign_in),
            auth_failures_per_ip: FailureLimiter::new(config.auth_failure_attempts, config.auth_failure_window_seconds),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&limits)));
        }
        limits
    }

    /// Counts one creation request of `ip` and, if it carries one, of its credential.
    fn check_creation(&self, ip: IpAddr, credential: Option<Digest32>) -> Result<(), AppError> {
        check(&self.create_per_ip, &ip, "create_per_ip")?;
        match credential {
            Some(credential) => check(&self.create_per_token, &credential, "create_per_token"),
            None => Ok(()),
        }
    }

    /// Counts one sign-in attempt of `ip` and, when the form names one, of the account.
    fn check_sign_in(&self, ip: IpAddr, account: Option<&str>) -> Result<(), AppError> {
        check(&self.sign_in_per_ip, &ip, "sign_in_per_ip")?;
        match account.map(|name| name.trim().to_lowercase()).filter(|name| !name.is_empty()) {
            Some(name) => check(&self.sign_in_per_account, &digest(name.as_bytes()), "sign_in_per_account"),
            None => Ok(()),
        }
    }

    /// Drops the keys whose limiter state is back to a fresh one (nothing to remember).
    fn retain_recent(&self) {
        self.create_per_token.retain_recent();
        self.create_per_ip.retain_recent();
        self.sign_in_per_ip.retain_recent();
        self.sign_in_per_account.retain_recent();
        self.create_per_token.shrink_to_fit();
        self.create_per_ip.shrink_to_fit();
        self.sign_in_per_ip.shrink_to_fit();
        self.sign_in_per_account.shrink_to_fit();
        self.auth_failures_per_ip.retain_recent();
    }

    /// How many keys the limiters hold, all together.
    pub fn tracked_keys(&self) -> usize {
        self.create_per_token.len()
            + self.create_per_ip.len()
            + self.sign_in_per_ip.len()
            + self.sign_in_per_account.len()
            + self.auth_failures_per_ip.len()
    }
}

/// Failed authentications per client address. A GCRA like governor's, but one that can be asked without counting:
/// a request is refused before its credential is checked (so a limited client learns nothing, not even that a
/// token is right), yet only a failed check counts, so clients with a valid token never use the limit up.
struct FailureLimiter {
    /// How long one failure takes to be given back.
    period: Duration,
    /// How many failures may be outstanding before requests are refused.
    burst: u32,
    /// Per address, when all its failures will have been given back (GCRA's theoretical arrival time).
    given_back_at: std::sync::Mutex<std::collections::HashMap<IpAddr, std::time::Instant>>,
}

impl FailureLimiter {
    /// `attempts` failures at once, given back evenly over `window_seconds`. Zero is read as one.
    fn new(attempts: u32, window_seconds: u64) -> Self {
        let burst = attempts.max(1);
        let period = Duration::from_secs(window_seconds.max(1)) / burst;
        FailureLimiter { period, burst, given_back_at: Default::default() }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<IpAddr, std::time::Instant>> {
        // Each entry is one instant, valid after every statement: a panic elsewhere cannot leave the map torn.
        self.given_back_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Refuses while `ip` has `burst` failures outstanding.
    fn check(&self, ip: IpAddr) -> Result<(), AppError> {
        let now = std::time::Instant::now();
        let Some(given_back_at) = self.map().get(&ip).copied() else { return Ok(()) };
        let tolerance = self.period * (self.burst - 1);
        let outstanding = given_back_at.saturating_duration_since(now);
        if outstanding <= tolerance {
            return Ok(());
        }
        let wait = outstanding - tolerance;
        let retry_after_seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(AppError::RateLimited { limit: "auth_failures_per_ip", retry_after_seconds: retry_after_seconds.max(1) })
    }

    /// Counts one failure of `ip`.
    fn record(&self, ip: IpAddr) {
        let now = std::time::Instant::now();
        let mut map = self.map();
        let given_back_at = map.entry(ip).or_insert(now);
        *given_back_at = (*given_back_at).max(now) + self.period;
    }

    fn retain_recent(&self) {
        let now = std::time::Instant::now();
        let mut map = self.map();
        map.retain(|_, given_back_at| *given_back_at > now);
        map.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.map().len()
    }
}

/// The failed-authentication limit of one request's client address.
pub struct AuthFailures {
    limits: Arc<RateLimits>,
    key: IpAddr,
}

impl AuthFailures {
    /// The limit of the request with these parts; `None` when the app was assembled without [`guard`] (the CLI's
    /// embedded engine, whose caller is the local user).
    pub fn of(parts: &Parts) -> Option<Self> {
        let limits = parts.extensions.get::<Arc<RateLimits>>()?;
        let ClientIp(ip) = parts.extensions.get::<ClientIp>()?;
        Some(AuthFailures { limits: Arc::clone(limits), key: rate_key(*ip) })
    }

    /// Refuses (429) while the address has used up its failures; call it before the credential is checked.
    pub fn check(&self) -> Result<(), AppError> {
        self.limits.auth_failures_per_ip.check(self.key)
    }

    /// Counts a failed authentication of the address.
    pub fn record(&self) {
        self.limits.auth_failures_per_ip.record(self.key);
    }
}

/// `burst` at once, then `rate` per second. Zero is read as one: a limit of nothing would lock everyone out.
fn per_second(burst: u32, rate: u32) -> Quota {
    Quota::per_second(NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN)).allow_burst(at_least_one(burst))
}

/// `attempts` per `window_seconds`, given back evenly over the window.
fn per_window(attempts: u32, window_seconds: u64) -> Quota {
    let attempts = at_least_one(attempts);
    let period = Duration::from_secs(window_seconds.max(1)) / attempts.get();
    Quota::with_period(period).unwrap_or_else(|| Quota::per_second(attempts)).allow_burst(attempts)
}

fn at_least_one(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

fn check<K>(limiter: &KeyedLimiter<K>, key: &K, limit: &'static str) -> Result<(), AppError>
where
    K: std::hash::Hash + Eq + Clone,
{
    limiter.check_key(key).map_err(|not_until| {
        let wait = not_until.wait_time_from(limiter.clock().now());
        // Whole seconds, rounded up, and never 0: "retry in 0 s" would invite an immediate, refused retry.
        let retry_after_seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        AppError::RateLimited { limit, retry_after_seconds: retry_after_seconds.max(1) }
    })
}

async fn sweep(limits: Weak<RateLimits>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(limits) = limits.upgrade() else { return };
        limits.retain_recent();
    }
}

fn digest(value: &[u8]) -> Digest32 {
    Sha256::digest(value).into()
}

/// The address the rate limits count a request under: see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The client address of a request to a server with `config`.
fn client_ip(request: &Request, config: &LimitsConfig) -> IpAddr {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |ConnectInfo(addr)| addr.ip());
    forwarded_client(peer, request.headers(), config)
}

/// The peer, or behind a trusted proxy the rightmost `X-Forwarded-For` address that is not a trusted proxy: each
/// proxy appends the address it saw, so everything left of that address was written by the client and is not
/// believed.
fn forwarded_client(peer: IpAddr, headers: &HeaderMap, config: &LimitsConfig) -> IpAddr {
    let trusted = |ip: IpAddr| {
        if config.trusted_proxies.is_empty() { ip == peer } else { config.trusted_proxies.contains(&ip) }
    };
    if !config.trust_proxy_headers || !trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    for hop in hops.into_iter().rev() {
        match parse_hop(hop) {
            Some(ip) if trusted(ip) => continue,
            Some(ip) => return ip,
            // Not an address: the chain is broken here, and nothing further left can be believed.
            None => break,
        }
    }
    peer
}

/// `1.2.3.4`, `2001:db8::1`, `1.2.3.4:5678` or `[2001:db8::1]:80`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>().ok().or_else(|| hop.parse::<SocketAddr>().ok().map(|addr| addr.ip()))
}

/// The key an address is limited under: IPv4 as is; IPv6 by its /64, the block one subscriber usually holds (so
/// walking through a /64 does not give an attacker fresh limits); IPv4-mapped IPv6 as the IPv4 address.
fn rate_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let [a, b, c, d, ..] = v6.segments();
                IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
            }
        },
    }
}

/// The credential a creation request is counted under: its bearer token, else its session cookie; hashed.
fn credential_key(headers: &HeaderMap) -> Option<Digest32> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        return Some(digest(value.as_bytes()));
    }
    let jar = axum_extra::extract::CookieJar::from_headers(headers);
    jar.get(SESSION_COOKIE).map(|cookie| digest(cookie.value().as_bytes()))
}

/// Outermost layer of the app: works out the client address, hands it and the limiters to handlers, and refuses
/// creation requests over their limits before anything else is done with them.
pub async fn guard(State(limits): State<Arc<RateLimits>>, mut request: Request, next: Next) -> Response {
    let ip = client_ip(&request, &limits.config);
    if request.method() == Method::POST
        && CREATION_PATHS.contains(&request.uri().path())
        && let Err(err) = limits.check_creation(rate_key(ip), credential_key(request.headers()))
    {
        return err.into_response();
    }
    request.extensions_mut().insert(ClientIp(ip));
    request.extensions_mut().insert(Arc::clone(&limits));
    next.run(request).await
}

/// Counts one creation that does not arrive as a `POST` to a creation path (a question asked through an MCP tool
/// call), under the same limits as [`guard`]'s, from the request's parts.
pub fn check_creation_in(parts: &Parts) -> Result<(), AppError> {
    match (parts.extensions.get::<Arc<RateLimits>>(), parts.extensions.get::<ClientIp>()) {
        (Some(limits), Some(ClientIp(ip))) => limits.check_creation(rate_key(*ip), credential_key(&parts.headers)),
        // Only reachable if the router was assembled without `guard`: a bug, not a client's fault.
        _ => Err(AppError::Internal("the rate-limit layer is missing".into())),
    }
}

/// What a handler that limits itself (sign-in) extracts: the limiters and the client address of the request.
pub struct RequestLimits {
    limits: Arc<RateLimits>,
    ip: IpAddr,
}

impl RequestLimits {
    /// Counts one sign-in attempt; `account` is the user name the form names, if any (a token sign-in names none
    /// and is limited per address only). Call it before the credential is checked, so a refused attempt learns
    /// nothing about it.
    pub fn check_sign_in(&self, account: Option<&str>) -> Result<(), AppError> {
        self.limits.check_sign_in(rate_key(self.ip), account)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestLimits {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let limits = parts.extensions.get::<Arc<RateLimits>>().cloned();
        let ip = parts.extensions.get::<ClientIp>().copied();
        match (limits, ip) {
            (Some(limits), Some(ClientIp(ip))) => Ok(RequestLimits { limits, ip }),
            // Only reachable if the router was assembled without `guard`: a bug, not a client's fault.
            _ => Err(AppError::Internal("the rate-limit layer is missing".into())),
        }
    }
}

/// Bounds every request body but an upload's: `/auth/*` to [`AUTH_BODY_LIMIT`], everything else to [`super::API_BODY_LIMIT`], so no
/// route reads more, not even one that reads its body without an axum extractor (server functions, MCP). A declared
/// length over the limit is refused at once (hyper never delivers more than a declared length); a body of
/// undeclared length (chunked) is read here, up to the limit, so that an overflow is refused the same way instead of
/// surfacing as whatever error the route's reader makes of it.
pub async fn limit_body(request: Request, next: Next) -> Response {
    // An upload's handler reads its body as a stream, up to `HOLDPOINT_MAX_UPLOAD_BYTES` (see `http::files`).
    if request.method() == Method::POST && request.uri().path() == super::files::UPLOAD_PATH {
        return next.run(request).await;
    }
    // So does the question page's plain answer form with a file input (see `web::answer_from_form`).
    let multipart =
        request.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"multipart/form-data"));
    if request.method() == Method::POST && request.uri().path().starts_with("/ui/answer/") && multipart {
        return next.run(request).await;
    }
    let limit = if request.uri().path().starts_with("/auth/") { AUTH_BODY_LIMIT } else { super::API_BODY_LIMIT };
    let too_large = || AppError::TooLarge(format!("request body is larger than {limit} bytes")).into_response();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok())
        .or_else(|| request.body().size_hint().exact());
    match declared {
        Some(length) if length > limit as u64 => too_large(),
        Some(_) => next.run(request).await,
        None => {
            let (parts, body) = request.into_parts();
            match http_body_util::Limited::new(body, limit).collect().await {
                Ok(collected) => next.run(Request::from_parts(parts, Body::from(collected.to_bytes()))).await,
                Err(err) if err.is::<http_body_util::LengthLimitError>() => too_large(),
                Err(_) => AppError::BadRequest("the request body could not be read".into()).into_response(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LimitsConfig {
        LimitsConfig::defaults()
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", value.parse().unwrap());
        headers
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_addresses_are_ignored_unless_proxies_are_trusted() {
        let headers = forwarded("203.0.113.7");
        assert_eq!(forwarded_client(ip("10.0.0.2"), &headers, &config()), ip("10.0.0.2"));
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_address_is_the_client() {
        let mut config = config();
        config.trust_proxy_headers = true;
        // The client wrote "1.1.1.1" itself; the proxy appended the address it saw.
        let headers = forwarded("1.1.1.1, 203.0.113.7");
        assert_eq!(forwarded_client(ip("10.0.0.2"), &headers, &config), ip("203.0.113.7"));
        // Two proxies: both are skipped.
        config.trusted_proxies = vec![ip("10.0.0.2"), ip("10.0.0.3")];
        let headers = forwarded("1.1.1.1, 203.0.113.7, 10.0.0.3");
        assert_eq!(forwarded_client(ip("10.0.0.2"), &headers, &config), ip("203.0.113.7"));
        // A peer that is not one of the proxies is the client, whatever it claims.
        assert_eq!(forwarded_client(ip("198.51.100.1"), &headers, &config), ip("198.51.100.1"));
    }

    #[test]
    fn a_garbled_forwarded_chain_falls_back_to_the_peer() {
        let mut config = config();
        config.trust_proxy_headers = true;
        assert_eq!(forwarded_client(ip("10.0.0.2"), &forwarded("nonsense"), &config), ip("10.0.0.2"));
        assert_eq!(forwarded_client(ip("10.0.0.2"), &HeaderMap::new(), &config), ip("10.0.0.2"));
        assert_eq!(forwarded_client(ip("10.0.0.2"), &forwarded("[2001:db8::9]:443"), &config), ip("2001:db8::9"));
    }

    #[test]
    fn ipv6_addresses_are_limited_by_their_64_bit_prefix() {
        assert_eq!(rate_key(ip("2001:db8:1:2:aaaa::1")), rate_key(ip("2001:db8:1:2:bbbb::2")));
        assert_ne!(rate_key(ip("2001:db8:1:2::1")), rate_key(ip("2001:db8:1:3::1")));
        assert_eq!(rate_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(rate_key(ip("192.0.2.1")), ip("192.0.2.1"));
    }

    #[tokio::test]
    async fn sign_in_attempts_are_limited_per_address_and_per_account() {
        let mut config = config();
        config.signin_rate_attempts = 2;
        let limits = RateLimits::new(&config);
        let (a, b) = (ip("192.0.2.1"), ip("192.0.2.2"));
        assert!(limits.check_sign_in(a, Some("alice")).is_ok());
        assert!(limits.check_sign_in(a, Some("Alice ")).is_ok());
        let err = limits.check_sign_in(a, Some("bob")).unwrap_err();
        assert!(matches!(err, AppError::RateLimited { limit: "sign_in_per_ip", retry_after_seconds: 30 }), "{err:?}");
        // Another address, the same account (names compare trimmed and case-blind).
        let err = limits.check_sign_in(b, Some("ALICE")).unwrap_err();
        assert!(matches!(err, AppError::RateLimited { limit: "sign_in_per_account", .. }), "{err:?}");
        assert!(limits.check_sign_in(b, Some("bob")).is_ok());
    }

    #[test]
    fn failed_authentications_are_refused_beyond_the_burst_and_only_failures_count() {
        let limiter = FailureLimiter::new(3, 60);
        let (a, b) = (ip("192.0.2.1"), ip("192.0.2.2"));
        for _ in 0..100 {
            assert!(limiter.check(a).is_ok(), "checking alone counts nothing");
        }
        for _ in 0..3 {
            limiter.check(a).unwrap();
            limiter.record(a);
        }
        let err = limiter.check(a).unwrap_err();
        assert!(
            matches!(err, AppError::RateLimited { limit: "auth_failures_per_ip", retry_after_seconds: 20 }),
            "{err:?}"
        );
        assert!(limiter.check(b).is_ok());
        assert_eq!(limiter.len(), 1);
    }

    #[tokio::test]
    async fn idle_keys_are_swept() {
        let mut config = config();
        config.signin_rate_window_seconds = 1;
        config.signin_rate_attempts = 1000;
        let limits = RateLimits::new(&config);
        for n in 0..50u8 {
            limits.check_sign_in(IpAddr::V4(Ipv4Addr::new(192, 0, 2, n)), None).unwrap();
        }
        assert_eq!(limits.tracked_keys(), 50);
        // One attempt of 1000 per second is given back after a millisecond.
        tokio::time::sleep(Duration::from_millis(20)).await;
        limits.retain_recent();
        assert_eq!(limits.tracked_keys(), 0);
    }
}
