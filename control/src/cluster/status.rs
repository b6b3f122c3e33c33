//! Ingress status: the elected replica writes `status.loadBalancer.ingress` of our Ingresses —
//! the `--publish-service`'s load-balancer addresses or the `--publish-address` list — with
//! server-side apply (field manager `ramjet`), and only when what is there differs.
//!
//! It is a fixed point: after a write, the watch brings the object back with our value and nothing
//! more is written. A write made while the watch has not yet caught up is not repeated (the
//! object's resourceVersion says the view is older than the write). If somebody else keeps
//! reverting the value, ramjet stops after [`MAX_REWRITES`] and says so with one Warning Event on
//! the Ingress, instead of fighting.
//!
//! An Ingress that stops being ours while this replica leads (its class changed, our IngressClass
//! deleted, moved to another controller) loses the address ramjet wrote: ramjet applies an empty
//! status as field manager `ramjet`, which gives up its fields, so the server removes what only
//! ramjet owned and keeps what another writer set.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressLoadBalancerIngress};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;

use super::events::{ingress_reference, EventWriter, NewEvent};
use super::watch::Stores;
use super::{ClusterOptions, StatusAddresses, FIELD_MANAGER};
use crate::compile::ingress::ClassSelector;

/// Writes of the same value to the same Ingress that someone else undid, before ramjet gives up.
pub const MAX_REWRITES: u32 = 3;

/// How soon a round with a failed write is tried again, doubling up to [`RETRY_MAX`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// An address as status carries it: IP or host name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Address {
    Ip(String),
    Hostname(String),
}

impl Address {
    fn parse(s: &str) -> Address {
        match s.parse::<IpAddr>() {
            Ok(ip) => Address::Ip(ip.to_string()),
            Err(_) => Address::Hostname(s.to_string()),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            Address::Ip(ip) => json!({ "ip": ip }),
            Address::Hostname(h) => json!({ "hostname": h }),
        }
    }
}

/// The addresses in an Ingress's status (ports are not ours to compare).
fn current(ingress: &Ingress) -> Vec<Address> {
    let list = ingress.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
    list.into_iter().flatten().filter_map(entry_address).collect()
}

fn entry_address(e: &IngressLoadBalancerIngress) -> Option<Address> {
    match (&e.ip, &e.hostname) {
        (Some(ip), _) if !ip.is_empty() => Some(Address::Ip(ip.clone())),
        (_, Some(h)) if !h.is_empty() => Some(Address::Hostname(h.clone())),
        _ => None,
    }
}

/// What status should say, or `None` when there is nothing to say yet (no address source, or the
/// `--publish-service` Service does not exist).
pub(super) fn desired(source: &StatusAddresses, service: Option<&Service>) -> Option<Vec<Address>> {
    let mut addresses = match source {
        StatusAddresses::Nothing => return None,
        StatusAddresses::Addresses(list) => list.iter().map(|a| Address::parse(a)).collect(),
        StatusAddresses::Service { .. } => {
            let service = service?;
            let lb = service.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
            let mut found: Vec<Address> = lb
                .into_iter()
                .flatten()
                .filter_map(|e| match (&e.ip, &e.hostname) {
                    (Some(ip), _) if !ip.is_empty() => Some(Address::Ip(ip.clone())),
                    (_, Some(h)) if !h.is_empty() => Some(Address::Hostname(h.clone())),
                    _ => None,
                })
                .collect();
            if found.is_empty() {
                // Not a LoadBalancer (or not provisioned yet): its external IPs, if it has any.
                let external = service.spec.as_ref().and_then(|s| s.external_ips.as_ref());
                found = external.into_iter().flatten().map(|a| Address::parse(a)).collect();
            }
            found
        }
    };
    addresses.sort();
    addresses.dedup();
    Some(addresses)
}

/// What ramjet last wrote to one Ingress.
struct Written {
    value: Vec<Address>,
    /// The resourceVersion the decision was made on, and the one the write produced.
    before: Option<String>,
    after: Option<String>,
    writes: u32,
    gave_up: bool,
}

/// Keeps the status of our Ingresses right while this replica leads.
pub async fn run(
    client: Client,
    stores: Stores,
    options: Arc<ClusterOptions>,
    mut leader: watch::Receiver<bool>,
    events: EventWriter,
) {
    if options.status_addresses == StatusAddresses::Nothing {
        return;
    }
    stores.ready().await;
    let mut written: HashMap<(String, String), Written> = HashMap::new();
    let mut was_ours: HashSet<(String, String)> = HashSet::new();
    // After a write that failed (an API server that timed out, say), the next round comes by
    // itself: nothing else may change for a long time.
    let mut retry = RETRY_FIRST;
    loop {
        let mut failed = false;
        if *leader.borrow_and_update() {
            let ours;
            (ours, failed) = sync(&client, &stores, &options, &events, &mut written).await;
            was_ours = release_former(&client, &stores, ours, std::mem::take(&mut was_ours)).await;
        } else {
            written.clear();
            was_ours.clear();
        }
        retry = if failed { retry } else { RETRY_FIRST };
        tokio::select! {
            _ = stores.status_changed.notified() => tokio::time::sleep(options.debounce).await,
            changed = leader.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(retry), if failed => retry = (retry * 2).min(RETRY_MAX),
        }
    }
}

fn key_of(ingress: &Ingress) -> Option<(String, String)> {
    Some((ingress.metadata.namespace.clone()?, ingress.metadata.name.clone()?))
}

/// Whether field manager `ramjet` owns fields of this Ingress's status.
fn owns_status(ingress: &Ingress) -> bool {
    ingress.metadata.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER)
            && m.subresource.as_deref() == Some("status")
            && m.fields_v1.as_ref().is_some_and(|f| f.0.get("f:status").is_some())
    })
}

/// Gives up ramjet's status fields on the Ingresses that were ours at the last sync and no longer
/// are. Returns the Ingresses to look at next time: ours now, and those whose release failed.
async fn release_former(
    client: &Client,
    stores: &Stores,
    ours: HashSet<(String, String)>,
    was_ours: HashSet<(String, String)>,
) -> HashSet<(String, String)> {
    let mut next = ours;
    for ingress in stores.ingresses.state() {
        let Some(key) = key_of(&ingress) else { continue };
        if next.contains(&key) || !was_ours.contains(&key) || !owns_status(&ingress) {
            continue;
        }
        let (namespace, name) = &key;
        let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
        // No status in the applied configuration: ramjet owns nothing there any more.
        let patch = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": { "name": name, "namespace": namespace },
        });
        match api.patch_status(name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&patch)).await {
            Ok(_) => tracing::info!(ingress = %format!("{namespace}/{name}"), "no longer ours: status address removed"),
            Err(e) => {
                tracing::warn!(ingress = %format!("{namespace}/{name}"), error = %e, "cannot remove the status address of an Ingress that is no longer ours");
                next.insert(key);
            }
        }
    }
    next
}

/// Writes status where it differs; returns the Ingresses that are ours, and whether a write failed
/// (other than as forbidden, which retrying does not mend).
async fn sync(
    client: &Client,
    stores: &Stores,
    options: &ClusterOptions,
    events: &EventWriter,
    written: &mut HashMap<(String, String), Written>,
) -> (HashSet<(String, String)>, bool) {
    let selector = ClassSelector::new(&stores.classes.state(), &options.ingress);
    let ours: Vec<Arc<Ingress>> = stores.ingresses.state().into_iter().filter(|i| selector.selects(i)).collect();
    let keys: HashSet<(String, String)> = ours.iter().filter_map(|i| key_of(i)).collect();
    let service = stores.status_service.as_ref().and_then(|s| s.state().into_iter().next());
    let Some(want) = desired(&options.status_addresses, service.as_deref()) else { return (keys, false) };
    let mut failed = false;
    written.retain(|(ns, name), _| {
        ours.iter().any(|i| i.metadata.namespace.as_ref() == Some(ns) && i.metadata.name.as_ref() == Some(name))
    });
    for ingress in ours {
        let (Some(namespace), Some(name)) = (ingress.metadata.namespace.clone(), ingress.metadata.name.clone()) else {
            continue;
        };
        let mut have = current(&ingress);
        have.sort();
        have.dedup();
        if have == want {
            continue;
        }
        let version = ingress.metadata.resource_version.clone();
        let key = (namespace.clone(), name.clone());
        let mut writes = 1;
        if let Some(w) = written.get_mut(&key) {
            if w.value == want {
                if version == w.before || version == w.after {
                    // The watch has not shown our write yet.
                    continue;
                }
                // Somebody changed it after we wrote it.
                if w.gave_up {
                    continue;
                }
                if w.writes >= MAX_REWRITES {
                    w.gave_up = true;
                    tracing::warn!(ingress = %format!("{namespace}/{name}"), "status.loadBalancer keeps being changed by another writer; ramjet stops writing it");
                    events
                        .create(NewEvent {
                            regarding: ingress_reference(&ingress),
                            warning: true,
                            reason: "StatusReverted",
                            action: "UpdateStatus",
                            note: format!(
                                "status.loadBalancer.ingress was changed back {} times after ramjet wrote it; ramjet stops writing it so as not to fight another writer",
                                w.writes
                            ),
                        })
                        .await;
                    continue;
                }
                writes = w.writes + 1;
            }
        }
        let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
        let patch = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": { "name": name, "namespace": namespace },
            "status": { "loadBalancer": { "ingress": want.iter().map(Address::to_json).collect::<Vec<_>>() } },
        });
        match api.patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await {
            Ok(updated) => {
                tracing::info!(ingress = %format!("{namespace}/{name}"), addresses = ?want, "status written");
                written.insert(
                    key,
                    Written {
                        value: want.clone(),
                        before: version,
                        after: updated.metadata.resource_version,
                        writes,
                        gave_up: false,
                    },
                );
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                tracing::debug!(ingress = %format!("{namespace}/{name}"), "not allowed to write Ingress status: {}", s.message);
            }
            Err(e) => {
                failed = true;
                tracing::warn!(ingress = %format!("{namespace}/{name}"), error = %e, "cannot write Ingress status; retrying")
            }
        }
    }
    (keys, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_come_from_flags_or_the_service() {
        let flags =
            StatusAddresses::Addresses(vec!["203.0.113.7".into(), "lb.example.com".into(), "203.0.113.7".into()]);
        assert_eq!(
            desired(&flags, None),
            Some(vec![Address::Ip("203.0.113.7".into()), Address::Hostname("lb.example.com".into())])
        );
        let service: Service = serde_json::from_value(json!({
            "metadata": { "name": "ramjet", "namespace": "ingress" },
            "status": { "loadBalancer": { "ingress": [{ "ip": "198.51.100.1" }] } }
        }))
        .unwrap();
        let source = StatusAddresses::Service { namespace: "ingress".into(), name: "ramjet".into() };
        assert_eq!(desired(&source, Some(&service)), Some(vec![Address::Ip("198.51.100.1".into())]));
        assert_eq!(desired(&source, None), None);
        assert_eq!(desired(&StatusAddresses::Nothing, Some(&service)), None);
    }
}
