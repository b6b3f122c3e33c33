//! What changed between two compiled tables, in counts, lists and one sentence.
//!
//! The diff is taken over compiled tables, not API objects: an edit that compiles to the same route
//! does not show, and an endpoint change with no Ingress edit does.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;

use ramjet_shared::{BackendKind, CertId, HostRoutes, RouteKey, RouteTable};
use serde::Serialize;

/// What a route resolves to, as far as the audit trail is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteTarget {
    pub backend: String,
    pub endpoints: Vec<String>,
}

/// A table reduced to what the diff compares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableView {
    pub routes: BTreeMap<RouteKey, RouteTarget>,
    pub hosts: BTreeSet<String>,
    pub certs: BTreeMap<String, CertId>,
    pub default_backend: Option<String>,
}

impl TableView {
    /// Views of only what differs between two tables: host groups that are the same in both
    /// (shared, or equal by digest) are left out of both, so the diff costs time for what changed,
    /// not for the size of the table. TLS and the default backend are always included.
    pub fn changed_parts(old: &RouteTable, new: &RouteTable) -> (TableView, TableView) {
        let same = |a: &HostRoutes, b: Option<&Arc<HostRoutes>>| b.is_some_and(|b| b.digest() == a.digest());
        let mut old_view = TableView::default();
        let mut new_view = TableView::default();
        for group in new.hosts() {
            if !same(group, old.host_group(&group.host)) {
                new_view.add_group(group);
            }
        }
        for group in old.hosts() {
            if !same(group, new.host_group(&group.host)) {
                old_view.add_group(group);
            }
        }
        old_view.add_tls_and_default(old);
        new_view.add_tls_and_default(new);
        (old_view, new_view)
    }

    fn add_group(&mut self, group: &HostRoutes) {
        if !group.host.is_empty() {
            self.hosts.insert(group.host.to_string());
        }
        for (key, route) in group.routes() {
            self.routes.insert(key, RouteTarget::of(&route.backend));
        }
    }

    fn add_tls_and_default(&mut self, table: &RouteTable) {
        for (host, id) in table.tls_hosts() {
            self.certs.insert(host.to_string(), *id);
        }
        self.default_backend = table.default_route().map(|r| r.backend.name.to_string());
    }

    /// The whole table (tests and tools; the applier uses [`TableView::changed_parts`]).
    pub fn of(table: &RouteTable) -> Self {
        let mut view = TableView::default();
        for group in table.hosts() {
            view.add_group(group);
        }
        view.add_tls_and_default(table);
        view
    }
}

impl RouteTarget {
    fn of(b: &ramjet_shared::Backend) -> Self {
        RouteTarget {
            backend: b.name.to_string(),
            endpoints: match &b.kind {
                BackendKind::Endpoints(e) => e.iter().map(|a| a.to_string()).collect(),
                BackendKind::Respond(r) => vec![format!("respond {}", r.status)],
            },
        }
    }
}

/// The diff between two compiled tables.
pub fn diff_tables(old: &RouteTable, new: &RouteTable) -> TableDiff {
    let (old, new) = TableView::changed_parts(old, new);
    diff(&old, &new)
}

/// The changes from one table to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableDiff {
    pub routes_added: BTreeMap<String, RouteTarget>,
    pub routes_removed: Vec<String>,
    /// Routes whose backend or endpoints moved: the new target.
    pub backends_changed: BTreeMap<String, RouteTarget>,
    pub hosts_added: Vec<String>,
    pub hosts_removed: Vec<String>,
    /// Hosts that gained a certificate / lost theirs.
    pub certs_added: Vec<String>,
    pub certs_removed: Vec<String>,
    /// Hosts that kept TLS but whose certificate changed.
    pub certs_rotated: Vec<String>,
    pub mirrors_added: Vec<String>,
    pub mirrors_removed: Vec<String>,
    /// The new default backend (`None` inside means it was removed), when it changed.
    pub default_backend: Option<Option<String>>,
    #[serde(skip)]
    keys: DiffKeys,
}

/// The exact changes by key, so a diff can be applied (tests) without parsing strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DiffKeys {
    added: BTreeMap<RouteKey, RouteTarget>,
    removed: Vec<RouteKey>,
    changed: BTreeMap<RouteKey, RouteTarget>,
    certs_set: BTreeMap<String, CertId>,
    certs_unset: Vec<String>,
}

/// Counts of a diff, as the audit log line and the webhook carry them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DiffCounts {
    pub routes_added: usize,
    pub routes_removed: usize,
    pub backends_changed: usize,
    pub hosts_added: usize,
    pub hosts_removed: usize,
    pub certs_added: usize,
    pub certs_removed: usize,
    pub certs_rotated: usize,
    pub mirrors_added: usize,
    pub mirrors_removed: usize,
    pub default_backend_changed: bool,
}

pub fn diff(old: &TableView, new: &TableView) -> TableDiff {
    let mut d = TableDiff::default();
    for (key, target) in &new.routes {
        match old.routes.get(key) {
            None => {
                d.keys.added.insert(key.clone(), target.clone());
            }
            Some(prev) if prev != target => {
                d.keys.changed.insert(key.clone(), target.clone());
            }
            _ => {}
        }
    }
    d.keys.removed = old.routes.keys().filter(|k| !new.routes.contains_key(*k)).cloned().collect();
    d.routes_added = d.keys.added.iter().map(|(k, t)| (k.to_string(), t.clone())).collect();
    d.routes_removed = d.keys.removed.iter().map(|k| k.to_string()).collect();
    d.backends_changed = d.keys.changed.iter().map(|(k, t)| (k.to_string(), t.clone())).collect();
    d.hosts_added = new.hosts.difference(&old.hosts).cloned().collect();
    d.hosts_removed = old.hosts.difference(&new.hosts).cloned().collect();

    for (host, id) in &new.certs {
        match old.certs.get(host) {
            Some(prev) if prev != id => d.certs_rotated.push(host.clone()),
            Some(_) => continue,
            None => d.certs_added.push(host.clone()),
        }
        d.keys.certs_set.insert(host.clone(), *id);
    }
    d.keys.certs_unset = old.certs.keys().filter(|h| !new.certs.contains_key(*h)).cloned().collect();
    d.certs_removed = d.keys.certs_unset.clone();
    if old.default_backend != new.default_backend {
        d.default_backend = Some(new.default_backend.clone());
    }
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
            mirrors_added: self.mirrors_added.len(),
            mirrors_removed: self.mirrors_removed.len(),
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
        count(c.mirrors_added, "mirror", "mirrors", "added");
        count(c.mirrors_removed, "mirror", "mirrors", "removed");
        match &self.default_backend {
            Some(Some(name)) => parts.push(format!("default backend now {name}")),
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
        for key in &self.keys.removed {
            view.routes.remove(key);
        }
        for (key, target) in self.keys.added.iter().chain(&self.keys.changed) {
            view.routes.insert(key.clone(), target.clone());
        }
        for host in &self.hosts_removed {
            view.hosts.remove(host);
        }
        view.hosts.extend(self.hosts_added.iter().cloned());
        for host in &self.keys.certs_unset {
            view.certs.remove(host);
        }
        view.certs.extend(self.keys.certs_set.iter().map(|(h, id)| (h.clone(), *id)));
        if let Some(default) = &self.default_backend {
            view.default_backend = default.clone();
        }
        view
    }
}

#[cfg(test)]
mod tests;
