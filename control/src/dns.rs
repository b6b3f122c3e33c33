//! DNS for names outside the cluster: ExternalName Services and `auth-url` hosts that are not
//! Services. Resolved on the control thread, never on a worker; the addresses go into the table
//! like any endpoints.
//!
//! Data flows in a loop: a compile records the names it needed ([`crate::compile::Draft::dns_names`]);
//! the rebuild loop hands them to [`run`], which resolves each (hickory, with the system's
//! resolver configuration or `--dns-server`), keeps every name fresh by its TTL (clamped between
//! `--dns-min-ttl` and `--dns-max-ttl`), and submits a new [`DnsAnswers`] whenever what a name
//! resolves to changes — which compiles a new generation. A name's first compile, before its first
//! answer, gives it no endpoints (its requests answer 503) and a warning.
//!
//! A failed lookup never empties a backend: the last good answer stays, with a warning saying the
//! lookups fail, and the name is asked again after the minimum TTL.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;
use tokio::sync::watch;
use tokio::time::Instant;

/// What a name resolved to, as the compiler reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAnswer {
    /// The addresses of its last good answer (sorted); empty before the first.
    pub addrs: Vec<IpAddr>,
    /// The last lookup failed (why is logged: the compiled view changes only when a name starts or
    /// stops failing, so a resolver that fails differently each time recompiles nothing).
    pub failing: bool,
}

/// Every name's answer: the compiler's view of DNS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsAnswers {
    names: BTreeMap<String, NameAnswer>,
}

impl DnsAnswers {
    /// The answer for `name` (lower case, without a trailing dot), if it was asked yet.
    pub fn get(&self, name: &str) -> Option<&NameAnswer> {
        self.names.get(name)
    }
}

/// How names are resolved (`--dns-server`, `--dns-min-ttl`, `--dns-max-ttl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// Ask these servers (UDP, then TCP); `None`: the system's configuration (`/etc/resolv.conf`).
    pub servers: Option<Vec<SocketAddr>>,
    /// An answer is kept at least this long, and a failed name asked again after it.
    pub min_ttl: Duration,
    /// An answer is kept at most this long.
    pub max_ttl: Duration,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings { servers: None, min_ttl: Duration::from_secs(5), max_ttl: Duration::from_secs(300) }
    }
}

/// The form names are kept in: lower case, without a trailing dot.
pub fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn resolver(settings: &DnsSettings) -> Result<TokioResolver, String> {
    let provider = TokioConnectionProvider::default();
    let mut builder = match &settings.servers {
        None => TokioResolver::builder(provider).map_err(|e| format!("the system's DNS configuration: {e}"))?,
        Some(servers) => {
            let mut config = ResolverConfig::new();
            for server in servers {
                config.add_name_server(NameServerConfig::new(*server, Protocol::Udp));
                config.add_name_server(NameServerConfig::new(*server, Protocol::Tcp));
            }
            TokioResolver::builder_with_config(config, provider)
        }
    };
    let options: &mut ResolverOpts = builder.options_mut();
    // Names are asked whole (ExternalName and auth-url hosts are fully qualified), never with the
    // search list, and answers are cached here, not in the resolver.
    options.ndots = 0;
    options.cache_size = 0;
    // A and AAAA asked together; a server that does not answer is given up on within seconds
    // (the last answer stays meanwhile).
    options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    options.timeout = Duration::from_secs(2);
    options.attempts = 1;
    Ok(builder.build())
}

/// One name's state in [`run`].
struct Entry {
    answer: NameAnswer,
    next: Instant,
}

/// Resolves the names `wanted` holds and keeps them fresh, submitting the answers whenever they
/// change. Runs until `wanted`'s sender is dropped.
pub async fn run(
    settings: DnsSettings,
    mut wanted: watch::Receiver<BTreeSet<String>>,
    submit: impl Fn(Arc<DnsAnswers>),
) {
    let resolver = match resolver(&settings) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("{e}; names outside the cluster will not resolve");
            return;
        }
    };
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut published = DnsAnswers::default();
    loop {
        let names = wanted.borrow_and_update().clone();
        entries.retain(|name, _| names.contains(name));
        let now = Instant::now();
        for name in &names {
            entries
                .entry(name.clone())
                .or_insert(Entry { answer: NameAnswer { addrs: Vec::new(), failing: false }, next: now });
        }
        let due: Vec<String> = entries.iter().filter(|(_, e)| e.next <= now).map(|(n, _)| n.clone()).collect();
        // All at once: a name whose server does not answer never holds the others back.
        let mut lookups = tokio::task::JoinSet::new();
        for name in due {
            let resolver = resolver.clone();
            lookups.spawn(async move {
                let looked = resolver.lookup_ip(format!("{name}.")).await;
                (name, looked)
            });
        }
        while let Some(done) = lookups.join_next().await {
            let Ok((name, looked)) = done else { continue };
            let Some(entry) = entries.get_mut(&name) else { continue };
            match looked {
                Ok(lookup) => {
                    let mut addrs: Vec<IpAddr> = lookup.iter().collect();
                    addrs.sort();
                    addrs.dedup();
                    let ttl = lookup.valid_until().saturating_duration_since(std::time::Instant::now());
                    entry.next = Instant::now() + ttl.clamp(settings.min_ttl, settings.max_ttl);
                    if entry.answer.addrs != addrs || entry.answer.failing {
                        tracing::info!(name = %name, ?addrs, ?ttl, "resolved");
                    }
                    entry.answer = NameAnswer { addrs, failing: false };
                }
                Err(e) => {
                    if !entry.answer.failing {
                        tracing::warn!(name = %name, error = %e, kept = ?entry.answer.addrs, "DNS lookup failed");
                    }
                    entry.answer.failing = true;
                    entry.next = Instant::now() + settings.min_ttl;
                }
            }
        }
        let answers = DnsAnswers { names: entries.iter().map(|(n, e)| (n.clone(), e.answer.clone())).collect() };
        if answers != published {
            published = answers.clone();
            submit(Arc::new(answers));
        }
        let next = entries.values().map(|e| e.next).min();
        tokio::select! {
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = sleep_until(next) => {}
        }
    }
}

/// Each of `names` looked up once, all at once (for `ramjet migration-report`, which judges what
/// the daemon would serve): its addresses, or failing without any.
pub async fn resolve_once(settings: &DnsSettings, names: &BTreeSet<String>) -> DnsAnswers {
    let failed = |names: &BTreeSet<String>| DnsAnswers {
        names: names.iter().map(|n| (n.clone(), NameAnswer { addrs: Vec::new(), failing: true })).collect(),
    };
    let resolver = match resolver(settings) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("{e}; names outside the cluster do not resolve");
            return failed(names);
        }
    };
    let mut lookups = tokio::task::JoinSet::new();
    for name in names.iter().cloned() {
        let resolver = resolver.clone();
        lookups.spawn(async move {
            let looked = resolver.lookup_ip(format!("{name}.")).await;
            (name, looked)
        });
    }
    let mut answers = failed(names);
    while let Some(done) = lookups.join_next().await {
        let Ok((name, Ok(lookup))) = done else { continue };
        let mut addrs: Vec<IpAddr> = lookup.iter().collect();
        addrs.sort();
        addrs.dedup();
        answers.names.insert(name, NameAnswer { addrs, failing: false });
    }
    answers
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
