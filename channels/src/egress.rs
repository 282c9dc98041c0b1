//! The guard of every request the server makes to an address it is given: web pushes, webhooks and questions'
//! callbacks, model endpoints, the `http_request` tool, Slack's Web API and the MCP gateway's upstream servers.
//!
//! Whoever can name a destination could otherwise point the server at what only it can reach: its own loopback
//! listeners, the cloud's metadata service, the private network behind it. So the guard refuses every address of the
//! IANA IPv4 and IPv6 special-purpose registries ([`is_public`]), in every spelling (an IPv4 address inside an
//! IPv6 one is judged as that IPv4 address or refused), unless the purpose's setting allows private destinations.
//!
//! - An address written in the URL is checked as written ([`EgressPolicy::refusal`]); a name is resolved by the HTTP
//!   client's own resolver ([`GuardedResolver`]), which hands on only the allowed addresses, so the connection goes
//!   to an address that was checked: a name that resolves to a public address once and to an internal one later
//!   (DNS rebinding) is not reached.
//! - `localhost` and names under it are loopback by definition (RFC 6761) and refused without asking DNS.
//! - No redirect is followed (a destination answers for itself) and no proxy from the environment is used (the
//!   guard checks the address connected to, which behind a proxy would be the proxy's).
//! - An address the operator wrote in configuration (`http://127.0.0.1:11434/v1` as a model endpoint) is allowed
//!   whatever its range: writing it is allowing it. Names in configuration are resolved and checked like any other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Which private destinations one purpose may reach, and the setting that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    /// The setting that lets this purpose reach private addresses, named in refusals.
    pub setting: &'static str,
    /// Whether every address may be reached (the setting is on).
    pub allow_private: bool,
    /// Addresses the operator wrote in configuration: reachable whatever their range.
    pub named: Vec<IpAddr>,
}

impl EgressPolicy {
    /// The policy of a purpose whose private destinations `setting` allows.
    pub fn new(setting: &'static str, allow_private: bool) -> Self {
        EgressPolicy { setting, allow_private, named: Vec::new() }
    }

    /// The policy, with the addresses written in `destinations` (URLs or `host[:port]`, as configuration gives
    /// them) allowed. Names among them are not: they are checked when resolved.
    pub fn naming<'a>(mut self, destinations: impl IntoIterator<Item = &'a str>) -> Self {
        for destination in destinations {
            let destination = destination.trim();
            let url = if destination.contains("://") {
                url::Url::parse(destination)
            } else {
                url::Url::parse(&format!("http://{destination}"))
            };
            if let Some(ip) = url.ok().as_ref().and_then(literal_address) {
                self.named.push(ip);
            }
        }
        self
    }

    /// Whether `ip` may be connected to.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.named.contains(&ip)
    }

    /// Why `url`'s host, as written, may not be reached: no host, an address that is not allowed, or a `localhost`
    /// name. `None` when it may (a name is checked again when it is resolved).
    pub fn refusal(&self, url: &url::Url) -> Option<String> {
        match url.host() {
            None => Some("the URL has no host".into()),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                let loopback = name == "localhost" || name.ends_with(".localhost");
                (loopback && !self.allow_private).then(|| self.refused(&name))
            }
            Some(_) => literal_address(url).filter(|ip| !self.allows(*ip)).map(|ip| self.refused(&ip.to_string())),
        }
    }

    /// Checks `url`'s host as [`EgressPolicy::refusal`] does and, when it is a name, every address it resolves to
    /// now: `Err` says why it may not be reached. Connections are checked again by the client's resolver.
    pub async fn check_resolved(&self, url: &url::Url) -> Result<(), String> {
        if let Some(refusal) = self.refusal(url) {
            return Err(refusal);
        }
        if self.allow_private {
            // Every address is allowed: a lookup could refuse nothing, and a name that does not resolve yet (a
            // container not started) is no fault of the URL.
            return Ok(());
        }
        let Some(url::Host::Domain(name)) = url.host() else { return Ok(()) };
        let port = url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<IpAddr> = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| format!("{name} could not be resolved: {e}"))?
            .map(|address| address.ip())
            .collect();
        if addresses.is_empty() {
            return Err(format!("{name} resolves to no address"));
        }
        match addresses.into_iter().find(|ip| !self.allows(*ip)) {
            Some(ip) => Err(self.refused(&format!("{name} ({ip})"))),
            None => Ok(()),
        }
    }

    fn refused(&self, what: &str) -> String {
        format!(
            "{what} is in a private, loopback, link-local or other special-purpose range (allowed only with {})",
            self.setting
        )
    }

    /// An HTTP client built from `builder` that connects only where this policy allows, follows no redirect and
    /// uses no proxy.
    pub fn client(self, builder: reqwest::ClientBuilder) -> Result<GuardedClient, reqwest::Error> {
        let policy = Arc::new(self);
        let http = builder
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver(Arc::clone(&policy))))
            .build()?;
        Ok(GuardedClient { http, policy })
    }
}

/// The address written as `url`'s host, if it is one.
fn literal_address(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// Whether an address is one the server may be pointed at by others: outside every range of the IANA IPv4 and IPv6
/// special-purpose address registries and multicast. An IPv4 address carried in an IPv6 one (IPv4-mapped, NAT64's
/// well-known prefix, 6to4) is judged as that IPv4 address; the other IPv6 forms of IPv4 addresses (IPv4-compatible,
/// IPv4-translated, local-use NAT64, Teredo) are refused outright, as is everything outside global unicast
/// (`2000::/3`).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// The IPv4 special-purpose registry's ranges (and multicast, reserved and broadcast), as (network, prefix length).
const V4_SPECIAL: [([u8; 4], u8); 20] = [
    ([0, 0, 0, 0], 8),          // "this network"
    ([10, 0, 0, 0], 8),         // private
    ([100, 64, 0, 0], 10),      // shared address space (carrier-grade NAT)
    ([127, 0, 0, 0], 8),        // loopback
    ([169, 254, 0, 0], 16),     // link-local (cloud metadata services)
    ([172, 16, 0, 0], 12),      // private
    ([192, 0, 0, 0], 24),       // IETF protocol assignments (192.0.0.170/171: NAT64 discovery)
    ([192, 0, 2, 0], 24),       // documentation
    ([192, 31, 196, 0], 24),    // AS112
    ([192, 52, 193, 0], 24),    // AMT
    ([192, 88, 99, 0], 24),     // 6to4 relay anycast
    ([192, 168, 0, 0], 16),     // private
    ([192, 175, 48, 0], 24),    // direct delegation AS112
    ([198, 18, 0, 0], 15),      // benchmarking
    ([198, 51, 100, 0], 24),    // documentation
    ([203, 0, 113, 0], 24),     // documentation
    ([224, 0, 0, 0], 4),        // multicast
    ([240, 0, 0, 0], 4),        // reserved
    ([255, 255, 255, 255], 32), // limited broadcast (inside 240/4, listed for the record)
    ([192, 0, 0, 170], 31),     // NAT64 discovery (inside 192.0.0.0/24, listed for the record)
];

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    !V4_SPECIAL.iter().any(|(network, length)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(*length)).unwrap_or(0);
        bits & mask == u32::from(Ipv4Addr::from(*network)) & mask
    })
}

/// The IPv6 special-purpose registry's ranges inside global unicast (`2000::/3`), as (network, prefix length).
const V6_SPECIAL_GLOBAL: [(u128, u8); 4] = [
    (0x2001_0000 << 96, 23),      // IETF protocol assignments: Teredo, benchmarking, ORCHID, AMT, ...
    (0x2001_0db8 << 96, 32),      // documentation
    (0x2620_004f_8000 << 80, 48), // direct delegation AS112
    (0x3fff << 112, 20),          // documentation
];

fn in_v6(bits: u128, network: u128, length: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(length)).unwrap_or(0);
    bits & mask == network & mask
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let embedded = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    // IPv4-mapped (::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96) reach the IPv4 address they carry.
    if in_v6(bits, 0xffff << 32, 96) || in_v6(bits, 0x0064_ff9b << 96, 96) {
        return is_public_v4(embedded);
    }
    // 6to4 (2002::/16) carries its IPv4 address in bits 16..48.
    if in_v6(bits, 0x2002 << 112, 16) {
        return is_public_v4(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    // Everything else outside global unicast is special: unspecified, loopback, IPv4-compatible (::/96),
    // IPv4-translated (::ffff:0:0:0/96), the rest of 64:ff9b::/16 with local-use NAT64 (64:ff9b:1::/48), discard-only
    // (100::/64), SRv6 (5f00::/16), unique-local (fc00::/7), link-local (fe80::/10), site-local (fec0::/10) and
    // multicast (ff00::/8).
    in_v6(bits, 0x2000 << 112, 3) && !V6_SPECIAL_GLOBAL.iter().any(|(network, length)| in_v6(bits, *network, *length))
}

/// The HTTP client's resolver: the system's, with every address the policy does not allow taken out (a host with
/// none left cannot be reached). The client connects to what it returns, so to checked addresses only.
struct GuardedResolver(Arc<EgressPolicy>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.0);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let bare = host.trim_end_matches('.').to_ascii_lowercase();
            if !policy.allow_private && (bare == "localhost" || bare.ends_with(".localhost")) {
                return Err(policy.refused(&host).into());
            }
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addresses.into_iter().filter(|a| policy.allows(a.ip())).collect();
            if allowed.is_empty() {
                return Err(policy.refused(&format!("every address of {host}")).into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A request the guard refused, or one that failed on its way.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("not sent: {0}")]
    Refused(String),
    #[error("{}", crate::causes::error_chain(.0))]
    Http(#[from] reqwest::Error),
}

/// An HTTP client whose every request passes the guard. Cheap to clone.
#[derive(Clone)]
pub struct GuardedClient {
    http: reqwest::Client,
    policy: Arc<EgressPolicy>,
}

impl std::fmt::Debug for GuardedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedClient").field("policy", &self.policy).finish()
    }
}

impl GuardedClient {
    /// A request to build; send it with [`GuardedClient::send`].
    pub fn request(&self, method: reqwest::Method, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.http.request(method, url)
    }

    /// A `POST` to build; send it with [`GuardedClient::send`].
    pub fn post(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.http.post(url)
    }

    /// The HTTP client underneath, for a library that sends its own requests through it (the MCP gateway's
    /// upstream transport). Its resolver checks names only: whoever uses it checks the URL's written host with
    /// [`GuardedClient::refusal`] before its first request, as [`GuardedClient::execute`] does for each of its own.
    pub fn inner(&self) -> &reqwest::Client {
        &self.http
    }

    /// Why `url`'s host, as written, may not be reached (see [`EgressPolicy::refusal`]).
    pub fn refusal(&self, url: &url::Url) -> Option<String> {
        self.policy.refusal(url)
    }

    /// Sends a request built from this client.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, EgressError> {
        self.execute(request.build()?).await
    }

    /// Sends a request, after checking the host written in its URL: the resolver sees only names, so an address
    /// written in the URL is checked here.
    pub async fn execute(&self, request: reqwest::Request) -> Result<reqwest::Response, EgressError> {
        if let Some(refusal) = self.policy.refusal(request.url()) {
            return Err(EgressError::Refused(refusal));
        }
        Ok(self.http.execute(request).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_purpose_range_is_refused_in_every_spelling() {
        for special in [
            // IPv4 special-purpose registry, multicast, reserved and broadcast.
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.1",
            "192.0.0.9",
            "192.0.0.170",
            "192.0.0.171",
            "192.0.2.1",
            "192.31.196.1",
            "192.52.193.1",
            "192.88.99.1",
            "192.168.1.1",
            "192.175.48.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            // IPv6 special-purpose registry and multicast.
            "::",
            "::1",
            "::127.0.0.1",
            "::8.8.8.8",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:127.0.0.1",
            "::ffff:0:8.8.8.8",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::8.8.8.8",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:1::1",
            "2001:2::1",
            "2001:10::1",
            "2001:20::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2002:a9fe:a9fe::1",
            "2620:4f:8000::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd00::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            "ff0e::1",
        ] {
            assert!(!is_public(special.parse().unwrap()), "{special} is special-purpose");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "2001:200::1",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public} is public");
        }
    }

    #[test]
    fn loopback_spellings_in_urls_are_refused_as_written() {
        let guard = EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", false);
        for url in [
            "https://127.0.0.1:8443/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://017700000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://127.0.0.1./",
            "https://[::1]/",
            "https://[::127.0.0.1]/",
            "https://[::ffff:127.0.0.1]:9/",
            "https://[::ffff:0:127.0.0.1]/",
            "https://[64:ff9b::7f00:1]/",
            "https://[2002:7f00:1::1]/",
            "https://[fec0::1]/",
            "https://[fe80::1]/",
            "https://[fd12:3456::1]/",
            "http://0/",
            "http://0.0.0.0/",
            "http://169.254.169.254/latest/meta-data",
            "http://192.0.0.170/",
            "http://100.100.100.200/",
            "http://localhost/",
            "http://LOCALHOST./",
            "http://api.localhost:8080/",
        ] {
            let parsed = url::Url::parse(url).unwrap();
            let refusal = guard.refusal(&parsed).unwrap_or_else(|| panic!("{url} was allowed"));
            assert!(refusal.contains("HOLDPOINT_TEST_ALLOW_PRIVATE"), "{url}: {refusal}");
        }
        // An IPv6 zone is no part of a URL: such an address cannot even be written.
        assert!(url::Url::parse("http://[fe80::1%25eth0]/").is_err());
        for allowed in ["https://93.184.216.34/", "https://[2606:4700:4700::1111]/", "https://push.example.net/x"] {
            assert_eq!(guard.refusal(&url::Url::parse(allowed).unwrap()), None, "{allowed}");
        }
        let open = EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", true);
        assert_eq!(open.refusal(&url::Url::parse("http://127.0.0.1:9/").unwrap()), None);
        assert_eq!(open.refusal(&url::Url::parse("http://localhost:9/").unwrap()), None);
    }

    #[test]
    fn addresses_the_operator_wrote_are_allowed_and_no_others() {
        let guard = EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", false).naming([
            "http://127.0.0.1:11434/v1",
            "10.0.0.5:8080",
            "[::1]:9",
            "api.example.com",
            "localhost:80",
        ]);
        assert_eq!(
            guard.named,
            ["127.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.5".parse().unwrap(), "::1".parse().unwrap()]
        );
        for allowed in
            ["http://127.0.0.1:11434/v1/chat", "http://2130706433:11434/", "http://10.0.0.5:8080/", "http://[::1]:9/"]
        {
            assert_eq!(guard.refusal(&url::Url::parse(allowed).unwrap()), None, "{allowed}");
        }
        for refused in ["http://127.0.0.2/", "http://[::ffff:127.0.0.1]/", "http://localhost/", "http://10.0.0.6/"] {
            assert!(guard.refusal(&url::Url::parse(refused).unwrap()).is_some(), "{refused}");
        }
    }

    #[tokio::test]
    async fn a_name_is_refused_when_it_resolves_into_a_private_range() {
        let guard = EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", false);
        // `localhost` is refused without asking DNS; the check of resolved names goes through the system resolver.
        let refused = guard.check_resolved(&url::Url::parse("http://localhost:9/").unwrap()).await.unwrap_err();
        assert!(refused.contains("localhost"), "{refused}");
        let client = guard.client(reqwest::Client::builder()).unwrap();
        let error = client.send(client.post("http://localhost:9/")).await.unwrap_err();
        assert!(error.to_string().contains("HOLDPOINT_TEST_ALLOW_PRIVATE"), "{error}");
        let error = client.send(client.post("http://[::ffff:127.0.0.1]:9/")).await.unwrap_err();
        assert!(matches!(error, EgressError::Refused(_)), "{error}");
    }

    /// With private addresses allowed there is nothing to refuse, so a name is taken as written, resolved or not
    /// (`.invalid` never resolves; with the check, this asks no resolver).
    #[tokio::test]
    async fn with_private_addresses_allowed_a_name_need_not_resolve_yet() {
        let open = EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", true);
        open.check_resolved(&url::Url::parse("http://mcp-files.invalid:8080/mcp").unwrap()).await.unwrap();
    }

    #[tokio::test]
    async fn the_resolver_hands_on_only_allowed_addresses() {
        use reqwest::dns::Resolve as _;
        let strict = GuardedResolver(Arc::new(EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", false)));
        // The system resolver gives an address back as itself: what it resolves to is checked like any name's.
        for name in ["localhost", "localhost.", "127.0.0.1", "::1", "169.254.169.254"] {
            let resolved = strict.resolve(name.parse().unwrap()).await;
            let refusal = resolved.err().unwrap_or_else(|| panic!("{name} resolved")).to_string();
            assert!(refusal.contains("HOLDPOINT_TEST_ALLOW_PRIVATE"), "{name}: {refusal}");
        }
        let open = GuardedResolver(Arc::new(EgressPolicy::new("HOLDPOINT_TEST_ALLOW_PRIVATE", true)));
        let addresses: Vec<SocketAddr> = open.resolve("127.0.0.1".parse().unwrap()).await.unwrap().collect();
        assert_eq!(addresses[0].ip(), IpAddr::from([127, 0, 0, 1]));
    }
}
