//! What changed between two compiled tables, in counts, lists and one sentence.
//!
//! The diff is taken over compiled tables, not API objects: an edit that compiles to the same route
//! does not show, and an endpoint change with no Ingress edit does.
//!
//! It compares the same canonical items the table's digest is taken over
//! ([`RouteTable::items`]: routes, the default backend, TLS hosts, HTTPS redirects), item by item,
//! and every item that differs lands in a category. So a new digest never comes with "no route
//! changes": a changed direct response is a route whose backend changed, new endpoints behind the
//! default backend are a changed default backend, and a host that starts redirecting to HTTPS is a
//! redirect added.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;

pub use ramjet_shared::admin::DiffCounts;
use ramjet_shared::{
    Backend, BackendKind, CertId, HostRoutes, RouteKey, RoutePolicy, RouteTable, TableItem, TrailingSlash, Transport,
};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// What a route (or the default backend) resolves to, as far as the audit trail is concerned:
/// everything of a backend that its digest covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteTarget {
    pub backend: String,
    /// The endpoints requests are proxied to (empty for a direct response).
    pub endpoints: Vec<String>,
    /// The fixed response, when the backend answers directly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseTarget>,
    /// The route's rules in order, without their mirrors (`header x-canary == "always" ->
    /// shop/web-canary:80`, `always -> shop/web-canary:80 10/100, shop/web:80 90/100`), when they
    /// can send a request anywhere but the backend.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// Every other backend the rules can send to, as targets (so their endpoints count too).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_backends: Vec<RouteTarget>,
    /// The route's mirrors (`shop/shadow:80 100%`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// The mirrors' backends, as targets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirror_backends: Vec<RouteTarget>,
}

/// A direct response, named by its status and its body's size and hash (bodies can be large).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseTarget {
    pub status: u16,
    pub body_bytes: usize,
    /// The first 12 hex digits of the body's SHA-256.
    pub body_sha256: String,
}

impl RouteTarget {
    /// A route's target: its backend and, when it has a policy, its rules, the other backends they
    /// name and its mirrors.
    pub fn of_route(b: &Backend, policy: Option<&RoutePolicy>) -> Self {
        let mut target = RouteTarget::of(b);
        let Some(policy) = policy else { return target };
        target.rules = policy.rules.iter().map(|r| r.describe_choice()).collect();
        // A policy that only adds a mirror sends every request to the backend, as no policy does.
        if policy.rules.iter().all(|r| r.conditions.is_empty() && r.backends.iter().all(|w| w.backend.name == b.name)) {
            target.rules.clear();
        }
        let targets = |backends: &mut dyn Iterator<Item = &Backend>| {
            let mut v: Vec<RouteTarget> = backends.filter(|o| o.name != b.name).map(RouteTarget::of).collect();
            v.sort_by(|x, y| x.backend.cmp(&y.backend));
            v.dedup();
            v
        };
        target.other_backends = targets(&mut policy.backends().map(|b| &**b));
        target.mirrors = policy.mirrors();
        target.mirror_backends = targets(&mut policy.rules.iter().flat_map(|r| r.mirrors()).map(|m| &*m.backend));
        target
    }

    /// Whether the route sends requests elsewhere than `before` did: its backend, rules or their
    /// backends' endpoints changed, or its mirrors stayed the same but their endpoints moved.
    /// (Mirrors added or removed are counted as mirrors.)
    fn backend_changed(&self, before: &RouteTarget) -> bool {
        let core = |t: &RouteTarget| RouteTarget { mirrors: Vec::new(), mirror_backends: Vec::new(), ..t.clone() };
        core(self) != core(before) || (self.mirrors == before.mirrors && self.mirror_backends != before.mirror_backends)
    }

    pub fn of(b: &Backend) -> Self {
        match &b.kind {
            BackendKind::Endpoints(e) => RouteTarget {
                backend: b.name.to_string(),
                endpoints: e.iter().map(|a| a.to_string()).collect(),
                response: None,
                rules: Vec::new(),
                other_backends: Vec::new(),
                mirrors: Vec::new(),
                mirror_backends: Vec::new(),
            },
            BackendKind::Respond(r) => {
                let digest: [u8; 32] = Sha256::digest(&r.body).into();
                RouteTarget {
                    backend: b.name.to_string(),
                    endpoints: Vec::new(),
                    response: Some(ResponseTarget {
                        status: r.status,
                        body_bytes: r.body.len(),
                        body_sha256: digest[..6].iter().map(|b| format!("{b:02x}")).collect(),
                    }),
                    rules: Vec::new(),
                    other_backends: Vec::new(),
                    mirrors: Vec::new(),
                    mirror_backends: Vec::new(),
                }
            }
        }
    }
}

/// Which item of a table: the identity the diff matches items by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemKey {
    Route(RouteKey),
    DefaultBackend,
    /// A TLS host as declared.
    Tls(String),
    /// A host whose plain-HTTP requests are redirected to HTTPS.
    HttpsRedirect(String),
    /// A server name whose TLS connections are passed to a backend unopened.
    Passthrough(String),
    /// A host whose TLS clients are asked for a certificate.
    ClientAuth(String),
    /// A setting of the whole table, by name.
    Setting(&'static str),
    /// A port whose TCP connections (UDP flows) are relayed.
    PortRoute(Transport, u16),
    /// A server name (as declared) of a TLS route port.
    TlsPortName(u16, String),
}

/// What an item holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemValue {
    Target(RouteTarget),
    Cert(CertId),
    /// A value by its content's digest, and what it says.
    Described(ramjet_shared::Digest, String),
    Present,
}

impl ItemValue {
    fn target(&self) -> Option<&RouteTarget> {
        match self {
            ItemValue::Target(t) => Some(t),
            _ => None,
        }
    }
}

/// A table reduced to its canonical items, as the diff compares them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableView {
    pub items: BTreeMap<ItemKey, ItemValue>,
}

impl TableView {
    /// Views of only what differs between two tables: host groups that are the same in both
    /// (shared, or equal by digest) are left out of both, and so are the items outside host groups
    /// when their digests are equal. Every host group of both tables is looked at; see
    /// [`TableView::changed_parts_among`] for a diff that need not.
    pub fn changed_parts(old: &RouteTable, new: &RouteTable) -> (TableView, TableView) {
        let hosts = old.hosts().chain(new.hosts()).map(|g| &*g.host);
        TableView::changed_parts_among(old, new, hosts)
    }

    /// As [`TableView::changed_parts`], looking only at the host groups named in `hosts` (any
    /// order, repeats allowed): every other group is known to be the same in both tables, as when
    /// `hosts` are the groups that changed at each step between them. Costs time for `hosts`, not
    /// for the size of the tables.
    pub fn changed_parts_among<'h>(
        old: &RouteTable,
        new: &RouteTable,
        hosts: impl IntoIterator<Item = &'h str>,
    ) -> (TableView, TableView) {
        let mut old_view = TableView::default();
        let mut new_view = TableView::default();
        let mut seen = std::collections::HashSet::new();
        for host in hosts {
            if !seen.insert(host) {
                continue;
            }
            let (before, after) = (old.host_group(host), new.host_group(host));
            if before.zip(after).is_some_and(|(a, b)| Arc::ptr_eq(a, b) || a.digest() == b.digest()) {
                continue;
            }
            if let Some(group) = before {
                old_view.extend(group.items());
            }
            if let Some(group) = after {
                new_view.extend(group.items());
            }
        }
        if old.items_digest() != new.items_digest() {
            old_view.extend(old.table_items());
            new_view.extend(new.table_items());
        }
        (old_view, new_view)
    }

    /// The hosts (as declared: `*.` for a wildcard group, `""` for any host) whose groups differ
    /// between two tables.
    pub fn changed_hosts(old: &RouteTable, new: &RouteTable) -> Vec<Arc<str>> {
        let differs = |a: &Arc<HostRoutes>, b: Option<&Arc<HostRoutes>>| !b.is_some_and(|b| b.digest() == a.digest());
        let mut hosts: Vec<Arc<str>> = new
            .hosts()
            .filter(|g| differs(g, old.host_group(&g.host)))
            .chain(old.hosts().filter(|g| new.host_group(&g.host).is_none()))
            .map(|g| g.host.clone())
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The whole table (tests and tools; the applier uses [`TableView::changed_parts`]).
    pub fn of(table: &RouteTable) -> Self {
        let mut view = TableView::default();
        view.extend(table.items());
        view
    }

    fn extend(&mut self, items: Vec<TableItem<'_>>) {
        for item in items {
            let (key, value) = match item {
                TableItem::Route { backend, policy, .. } => (
                    ItemKey::Route(item.route_key().expect("a route item has a key")),
                    ItemValue::Target(RouteTarget::of_route(backend, policy)),
                ),
                TableItem::DefaultBackend(backend) => {
                    (ItemKey::DefaultBackend, ItemValue::Target(RouteTarget::of(backend)))
                }
                TableItem::Tls { host, cert } => (ItemKey::Tls(host.to_string()), ItemValue::Cert(cert)),
                TableItem::HttpsRedirect { host, trailing_slash } => (
                    ItemKey::HttpsRedirect(host.to_string()),
                    match trailing_slash {
                        TrailingSlash::Drop => ItemValue::Present,
                        TrailingSlash::Keep => ItemValue::Described(
                            ramjet_shared::digest_of("keeps a trailing slash"),
                            "keeps a trailing slash".into(),
                        ),
                    },
                ),
                TableItem::Passthrough { host, target } => (
                    ItemKey::Passthrough(host.to_string()),
                    ItemValue::Described(ramjet_shared::digest_of(target), target.to_string()),
                ),
                TableItem::Hsts(value) => (
                    ItemKey::Setting("strict-transport-security"),
                    ItemValue::Described(ramjet_shared::digest_of(&**value), value.to_string()),
                ),
                TableItem::UnloggedUnmatched => (
                    ItemKey::Setting("enable-access-log-for-default-backend"),
                    ItemValue::Described(ramjet_shared::digest_of("false"), "false".into()),
                ),
                TableItem::NoTlsRedirect(prefixes) => {
                    let value = prefixes.join(", ");
                    (
                        ItemKey::Setting("no-tls-redirect-locations"),
                        ItemValue::Described(ramjet_shared::digest_of(&value), value),
                    )
                }
                TableItem::ClientAuth { host, auth } => (
                    ItemKey::ClientAuth(host.to_string()),
                    ItemValue::Described(ramjet_shared::digest_of(auth), auth.to_string()),
                ),
                TableItem::PortRoute { transport, port, route } => (
                    ItemKey::PortRoute(transport, port),
                    ItemValue::Described(ramjet_shared::digest_of(route), route.to_string()),
                ),
                TableItem::TlsPortName { port, host, target } => (
                    ItemKey::TlsPortName(port, host.to_string()),
                    ItemValue::Described(ramjet_shared::digest_of(target), target.to_string()),
                ),
            };
            self.items.insert(key, value);
        }
    }

    /// Named hosts that have at least one route.
    pub fn hosts(&self) -> BTreeSet<String> {
        self.items
            .keys()
            .filter_map(|k| match k {
                ItemKey::Route(r) if !r.host.is_empty() => Some(r.host.to_string()),
                _ => None,
            })
            .collect()
    }
}

/// The diff between two compiled tables.
pub fn diff_tables(old: &RouteTable, new: &RouteTable) -> TableDiff {
    let (old, new) = TableView::changed_parts(old, new);
    diff(&old, &new)
}

/// The diff between two compiled tables that differ at most in the host groups named in `hosts`
/// (and in the items outside host groups, which are compared by digest).
pub fn diff_tables_among<'h>(
    old: &RouteTable,
    new: &RouteTable,
    hosts: impl IntoIterator<Item = &'h str>,
) -> TableDiff {
    let (old, new) = TableView::changed_parts_among(old, new, hosts);
    diff(&old, &new)
}

/// The changes from one table to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableDiff {
    pub routes_added: BTreeMap<String, RouteTarget>,
    pub routes_removed: Vec<String>,
    /// Routes whose backend, endpoints or direct response changed: the new target.
    pub backends_changed: BTreeMap<String, RouteTarget>,
    pub hosts_added: Vec<String>,
    pub hosts_removed: Vec<String>,
    /// Hosts that gained a certificate / lost theirs.
    pub certs_added: Vec<String>,
    pub certs_removed: Vec<String>,
    /// Hosts that kept TLS but whose certificate changed.
    pub certs_rotated: Vec<String>,
    /// Hosts whose plain-HTTP requests start / stop being redirected to HTTPS.
    pub https_redirects_added: Vec<String>,
    pub https_redirects_removed: Vec<String>,
    /// Mirrors a route gained / lost, as `route -> mirror` (a new route's mirrors are added, a
    /// removed route's removed).
    pub mirrors_added: Vec<String>,
    pub mirrors_removed: Vec<String>,
    /// Server names on the HTTPS port that go elsewhere than HTTPS now (passed through or
    /// terminated and relayed; new, or to other backends), as where they go, and those no longer.
    pub passthrough_added: BTreeMap<String, String>,
    pub passthrough_removed: Vec<String>,
    /// Hosts whose client-certificate authentication started or changed (what it is now), and
    /// those that no longer ask for a certificate.
    pub client_auth_set: BTreeMap<String, String>,
    pub client_auth_removed: Vec<String>,
    /// Settings of the whole table that changed: their new value (`None`: no longer set).
    pub settings: BTreeMap<String, Option<String>>,
    /// Ports (`tcp/5432`, `udp/53`; a TLS port by name: `tls/8883 shop.example.com`) whose route
    /// started or changed (what it is now), and those no longer routed.
    pub port_routes_set: BTreeMap<String, String>,
    pub port_routes_removed: Vec<String>,
    /// The new default backend (`None` inside means it was removed), when it changed: another
    /// backend, or the same one with other endpoints or another direct response.
    pub default_backend: Option<Option<RouteTarget>>,
    /// The name of the default backend before, when it changed.
    #[serde(skip)]
    default_backend_before: Option<String>,
    /// Every item that changed, with its new value (`None`: removed), so a diff can be applied.
    #[serde(skip)]
    changes: BTreeMap<ItemKey, Option<ItemValue>>,
}

/// Compares two views item by item; every item that differs is counted in exactly one category.
pub fn diff(old: &TableView, new: &TableView) -> TableDiff {
    let mut d = TableDiff::default();
    for (key, value) in &new.items {
        if old.items.get(key) != Some(value) {
            d.changes.insert(key.clone(), Some(value.clone()));
        }
    }
    for key in old.items.keys() {
        if !new.items.contains_key(key) {
            d.changes.insert(key.clone(), None);
        }
    }
    for (key, change) in &d.changes {
        let before = old.items.get(key);
        match (key, change) {
            (ItemKey::Route(route), Some(value)) => {
                let target = value.target().cloned().expect("a route holds a target");
                let before = before.and_then(|v| v.target());
                let no_mirrors = Vec::new();
                let old_mirrors = before.map_or(&no_mirrors, |b| &b.mirrors);
                for m in target.mirrors.iter().filter(|m| !old_mirrors.contains(m)) {
                    d.mirrors_added.push(format!("{route} -> {m}"));
                }
                for m in old_mirrors.iter().filter(|m| !target.mirrors.contains(m)) {
                    d.mirrors_removed.push(format!("{route} -> {m}"));
                }
                match before {
                    None => {
                        d.routes_added.insert(route.to_string(), target);
                    }
                    // Only the mirrors changed: counted as mirrors, not as a backend change.
                    Some(b) if !target.backend_changed(b) => {}
                    Some(_) => {
                        d.backends_changed.insert(route.to_string(), target);
                    }
                }
            }
            (ItemKey::Route(route), None) => {
                if let Some(b) = before.and_then(|v| v.target()) {
                    d.mirrors_removed.extend(b.mirrors.iter().map(|m| format!("{route} -> {m}")));
                }
                d.routes_removed.push(route.to_string());
            }
            (ItemKey::DefaultBackend, value) => {
                d.default_backend = Some(value.as_ref().and_then(|v| v.target().cloned()));
                d.default_backend_before = before.and_then(|v| v.target()).map(|t| t.backend.clone());
            }
            (ItemKey::Tls(host), Some(_)) if before.is_some() => d.certs_rotated.push(host.clone()),
            (ItemKey::Tls(host), Some(_)) => d.certs_added.push(host.clone()),
            (ItemKey::Tls(host), None) => d.certs_removed.push(host.clone()),
            (ItemKey::HttpsRedirect(host), Some(_)) => d.https_redirects_added.push(host.clone()),
            (ItemKey::HttpsRedirect(host), None) => d.https_redirects_removed.push(host.clone()),
            (ItemKey::Passthrough(host), Some(value)) => {
                if let ItemValue::Described(_, what) = value {
                    d.passthrough_added.insert(host.clone(), what.clone());
                }
            }
            (ItemKey::Passthrough(host), None) => d.passthrough_removed.push(host.clone()),
            (ItemKey::ClientAuth(host), Some(value)) => {
                if let ItemValue::Described(_, what) = value {
                    d.client_auth_set.insert(host.clone(), what.clone());
                }
            }
            (ItemKey::ClientAuth(host), None) => d.client_auth_removed.push(host.clone()),
            (ItemKey::PortRoute(transport, port), Some(value)) => {
                if let ItemValue::Described(_, what) = value {
                    d.port_routes_set.insert(format!("{transport}/{port}"), what.clone());
                }
            }
            (ItemKey::PortRoute(transport, port), None) => d.port_routes_removed.push(format!("{transport}/{port}")),
            (ItemKey::TlsPortName(port, host), Some(value)) => {
                if let ItemValue::Described(_, what) = value {
                    d.port_routes_set.insert(tls_port_name(*port, host), what.clone());
                }
            }
            (ItemKey::TlsPortName(port, host), None) => d.port_routes_removed.push(tls_port_name(*port, host)),
            (ItemKey::Setting(name), value) => {
                let now = match value {
                    Some(ItemValue::Described(_, what)) => Some(what.clone()),
                    _ => None,
                };
                d.settings.insert(name.to_string(), now);
            }
        }
    }
    let (old_hosts, new_hosts) = (old.hosts(), new.hosts());
    d.hosts_added = new_hosts.difference(&old_hosts).cloned().collect();
    d.hosts_removed = old_hosts.difference(&new_hosts).cloned().collect();
    d
}

impl TableDiff {
    pub fn counts(&self) -> DiffCounts {
        DiffCounts {
            routes_added: self.routes_added.len(),
            routes_removed: self.routes_removed.len(),
            backends_changed: self.backends_changed.len(),
            hosts_added: self.hosts_added.len(),
            hosts_removed: self.hosts_removed.len(),
            certs_added: self.certs_added.len(),
            certs_removed: self.certs_removed.len(),
            certs_rotated: self.certs_rotated.len(),
            https_redirects_added: self.https_redirects_added.len(),
            https_redirects_removed: self.https_redirects_removed.len(),
            mirrors_added: self.mirrors_added.len(),
            mirrors_removed: self.mirrors_removed.len(),
            passthrough_changed: self.passthrough_added.len() + self.passthrough_removed.len(),
            client_auth_changed: self.client_auth_set.len() + self.client_auth_removed.len(),
            settings_changed: self.settings.len(),
            port_routes_changed: self.port_routes_set.len() + self.port_routes_removed.len(),
            default_backend_changed: self.default_backend.is_some(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.counts() == DiffCounts::default()
    }

    /// "3 routes added, 1 cert rotated": the non-zero parts, or "no route changes".
    pub fn sentence(&self) -> String {
        let c = self.counts();
        let mut parts = Vec::new();
        let mut count = |n: usize, one: &str, many: &str, what: &str| {
            if n > 0 {
                parts.push(format!("{n} {} {what}", if n == 1 { one } else { many }));
            }
        };
        count(c.routes_added, "route", "routes", "added");
        count(c.routes_removed, "route", "routes", "removed");
        count(c.backends_changed, "backend", "backends", "changed");
        count(c.hosts_added, "host", "hosts", "added");
        count(c.hosts_removed, "host", "hosts", "removed");
        count(c.certs_added, "cert", "certs", "added");
        count(c.certs_removed, "cert", "certs", "removed");
        count(c.certs_rotated, "cert", "certs", "rotated");
        count(c.https_redirects_added, "HTTPS redirect", "HTTPS redirects", "added");
        count(c.https_redirects_removed, "HTTPS redirect", "HTTPS redirects", "removed");
        count(c.mirrors_added, "mirror", "mirrors", "added");
        count(c.mirrors_removed, "mirror", "mirrors", "removed");
        count(c.passthrough_changed, "TLS passthrough", "TLS passthroughs", "changed");
        count(c.client_auth_changed, "client certificate setting", "client certificate settings", "changed");
        count(c.settings_changed, "table setting", "table settings", "changed");
        count(c.port_routes_changed, "TCP/UDP route", "TCP/UDP routes", "changed");
        match &self.default_backend {
            Some(Some(now)) if self.default_backend_before.as_deref() == Some(now.backend.as_str()) => {
                parts.push(format!("default backend {} changed", now.backend))
            }
            Some(Some(now)) => parts.push(format!("default backend now {}", now.backend)),
            Some(None) => parts.push("default backend removed".into()),
            None => {}
        }
        if parts.is_empty() {
            "no route changes".into()
        } else {
            parts.join(", ")
        }
    }

    /// Applies this diff to `old`: the result equals the table it was taken against.
    pub fn apply(&self, old: &TableView) -> TableView {
        let mut view = old.clone();
        for (key, change) in &self.changes {
            match change {
                Some(value) => view.items.insert(key.clone(), value.clone()),
                None => view.items.remove(key),
            };
        }
        view
    }
}

#[cfg(test)]
mod tests;

/// How the audit names a TLS port's server name: `tls/8443 shop.example.com` (`*` for any name).
fn tls_port_name(port: u16, host: &str) -> String {
    format!("tls/{port} {}", if host.is_empty() { "*" } else { host })
}
