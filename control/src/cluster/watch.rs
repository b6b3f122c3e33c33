//! The reflectors: one kube-runtime watcher and store per kind the compiler reads, and the loop
//! that turns the stores into snapshots for the rebuild loop.
//!
//! Each watcher lists, then watches from the list's resourceVersion; a watch that ends is resumed,
//! a 410 Gone relists, and errors are logged and retried with backoff — the process never stops
//! for them. Nothing is submitted until every store has finished its first list, so the first
//! generation never lacks, say, the Secrets of Ingresses already listed.
//!
//! An Ingress whose status alone changed (ramjet's own status writes among them) wakes only the
//! status writer, not the compiler: at 5,000 Ingresses, recompiling after each of the leader's
//! 5,000 status writes made writing them all take many minutes.
//!
//! The Gateway API kinds are watched only when the API server serves their CRDs; without them,
//! discovery is looked at again (2 s after start, then every 10 s) and the kinds are picked up
//! once it serves them ([`gateway`]).

mod gateway;

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch, Notify};

use super::{ClusterOptions, StatusAddresses, FIELD_MANAGER};
use crate::compile::resolve::{OPAQUE_SECRET_TYPE, TLS_SECRET_TYPE};
use crate::compile::snapshot::ClusterSnapshot;
use crate::Input;

pub use gateway::{GatewayCell, GatewayStores};

/// The reflector stores, and a notification for every change to any of them.
#[derive(Clone)]
pub struct Stores {
    pub classes: Store<IngressClass>,
    pub ingresses: Store<Ingress>,
    pub services: Store<Service>,
    pub slices: Store<EndpointSlice>,
    /// `kubernetes.io/tls` Secrets: certificates, and CA bundles beside them.
    pub secrets: Store<Secret>,
    /// `Opaque` Secrets: basic-auth users, CA bundles on their own. Other types (service-account
    /// tokens, docker configs) are never read, so never held.
    pub opaque_secrets: Store<Secret>,
    /// ConfigMaps, when ramjet may list them.
    pub config_maps: Option<Store<ConfigMap>>,
    /// The `--publish-service` Service (watched on its own: it may be outside `--watch-namespace`).
    pub status_service: Option<Store<Service>>,
    /// Any change to the compiler's inputs.
    pub changed: Arc<Notify>,
    /// Any change to Ingresses, IngressClasses or the `--publish-service` Service (what status depends on).
    pub status_changed: Arc<Notify>,
    /// The Gateway API kinds, once the cluster serves their CRDs: set at start, or later when a
    /// look at discovery finds them; empty for good with `--gateway-api=false`.
    pub gateway: GatewayCell,
    /// Any change to a Gateway API object or what its status depends on.
    pub gateway_changed: Arc<Notify>,
    /// Turns true once every store has finished its first list.
    listed: watch::Receiver<bool>,
}

impl Stores {
    /// Starts one watcher per kind; the Gateway API kinds only when the API server serves
    /// `gateway.networking.k8s.io/v1`. A cluster without the CRDs is told once, Ingresses are
    /// served as ever, and the Gateway API kinds are picked up when the CRDs appear.
    pub async fn start(client: &Client, options: &ClusterOptions) -> Self {
        let changed = Arc::new(Notify::new());
        let gateway_changed = Arc::new(Notify::new());
        let gateway = gateway::start(client, options, [changed.clone(), gateway_changed.clone()]).await;
        let status_changed = Arc::new(Notify::new());
        let ns = options.watch_namespace.as_deref();
        let both = [changed.clone(), status_changed.clone()];
        let compile_only = [changed.clone()];
        // Whether a backend's Service or a listener's Secret exists is in Gateway API status.
        let compile_and_gateway = [changed.clone(), gateway_changed.clone()];
        let classes = reflect(Api::all(client.clone()), watcher::Config::default(), &both);
        // Status-only changes of an Ingress do not concern the compiler.
        let ingresses = reflect_compiled(
            api(client, ns),
            watcher::Config::default(),
            std::slice::from_ref(&status_changed),
            Some((changed.clone(), ingress_fingerprint)),
        );
        let services = reflect(api(client, ns), watcher::Config::default(), &compile_and_gateway);
        let slices = reflect(api(client, ns), watcher::Config::default(), &compile_only);
        let tls_only = watcher::Config::default().fields(&format!("type={TLS_SECRET_TYPE}"));
        let secrets = reflect(api(client, ns), tls_only, &compile_and_gateway);
        let opaque_only = watcher::Config::default().fields(&format!("type={OPAQUE_SECRET_TYPE}"));
        let opaque_secrets = reflect(api(client, ns), opaque_only, &compile_only);
        // ConfigMaps (custom-headers, BackendTLSPolicies' CA certificates), when ramjet may list
        // them: an older chart's RBAC does not grant it, and a store that cannot list never fills.
        let config_maps = listable::<ConfigMap>(client, ns, "ConfigMaps (for custom-headers and BackendTLSPolicies)")
            .await
            .then(|| reflect(api(client, ns), watcher::Config::default(), &compile_and_gateway));
        let status_service = match &options.status_addresses {
            StatusAddresses::Service { namespace, name } => Some(reflect(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
                std::slice::from_ref(&status_changed),
            )),
            _ => None,
        };
        // One task waits on the stores and tells everyone else: a store's readiness wakes only
        // the last task that polled it (a oneshot underneath), so several waiters would hang.
        let (listed_tx, listed) = watch::channel(false);
        let waiting = (
            classes.clone(),
            ingresses.clone(),
            services.clone(),
            slices.clone(),
            secrets.clone(),
            opaque_secrets.clone(),
            config_maps.clone(),
        );
        let status_service_store = status_service.clone();
        // Gateway API stores that start later are waited for before they are shown (gateway.rs).
        let gateway_stores = gateway.get().cloned();
        tokio::spawn(async move {
            if let Some(g) = gateway_stores {
                g.ready().await;
            }
            let (classes, ingresses, services, slices, secrets, opaque_secrets, config_maps) = waiting;
            let _ = futures::join!(
                classes.wait_until_ready(),
                ingresses.wait_until_ready(),
                services.wait_until_ready(),
                slices.wait_until_ready(),
                secrets.wait_until_ready(),
                opaque_secrets.wait_until_ready(),
                async {
                    if let Some(config_maps) = &config_maps {
                        let _ = config_maps.wait_until_ready().await;
                    }
                },
            );
            if let Some(s) = status_service_store {
                let _ = s.wait_until_ready().await;
            }
            let _ = listed_tx.send(true);
        });
        Stores {
            classes,
            ingresses,
            services,
            slices,
            secrets,
            opaque_secrets,
            config_maps,
            status_service,
            changed,
            status_changed,
            gateway,
            gateway_changed,
            listed,
        }
    }

    /// Waits until every store has finished its first list.
    pub async fn ready(&self) {
        let mut listed = self.listed.clone();
        let _ = listed.wait_for(|l| *l).await;
    }

    /// What the stores hold now.
    pub fn snapshot(&self, options: &ClusterOptions) -> ClusterSnapshot {
        let gateway = self.gateway.get();
        ClusterSnapshot {
            options: Arc::new(options.ingress.clone()),
            ingress_classes: self.classes.state(),
            ingresses: self.ingresses.state(),
            services: self.services.state(),
            endpoint_slices: self.slices.state(),
            secrets: self.secrets.state().into_iter().chain(self.opaque_secrets.state()).collect(),
            namespaces: gateway.map(|g| g.namespaces.state()).unwrap_or_default(),
            gateway_classes: gateway.map(|g| g.classes.state()).unwrap_or_default(),
            gateways: gateway.map(|g| g.gateways.state()).unwrap_or_default(),
            http_routes: gateway.map(|g| g.http_routes.state()).unwrap_or_default(),
            grpc_routes: gateway.and_then(|g| g.grpc_routes.as_ref()).map(|s| s.state()).unwrap_or_default(),
            reference_grants: gateway.map(|g| g.grants.state()).unwrap_or_default(),
            tcp_routes: gateway.and_then(|g| g.tcp_routes.as_ref()).map(|s| s.state()).unwrap_or_default(),
            tls_routes: gateway.and_then(|g| g.tls_routes.as_ref()).map(|s| s.state()).unwrap_or_default(),
            udp_routes: gateway.and_then(|g| g.udp_routes.as_ref()).map(|s| s.state()).unwrap_or_default(),
            backend_tls_policies: gateway.and_then(|g| g.backend_tls.as_ref()).map(|s| s.state()).unwrap_or_default(),
            config_maps: self.config_maps.as_ref().map(|s| s.state()).unwrap_or_default(),
            diagnostics: Vec::new(),
            not_read: Vec::new(),
        }
    }

    /// After every first list, hands a snapshot to the rebuild loop, and again after every change
    /// (changes within `options.debounce` of each other make one snapshot).
    pub async fn feed(self, options: Arc<ClusterOptions>, inputs: mpsc::UnboundedSender<Input>) {
        self.ready().await;
        tracing::info!(
            ingresses = self.ingresses.state().len(),
            services = self.services.state().len(),
            endpoint_slices = self.slices.state().len(),
            secrets = self.secrets.state().len() + self.opaque_secrets.state().len(),
            "cluster listed"
        );
        loop {
            if inputs.send(Input::Objects(Arc::new(self.snapshot(&options)))).is_err() {
                return;
            }
            self.changed.notified().await;
            tokio::time::sleep(options.debounce).await;
        }
    }
}

/// Whether ramjet may list `K` (one object asked for); when not, says so once, naming `what`.
async fn listable<K>(client: &Client, namespace: Option<&str>, what: &str) -> bool
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + serde::de::DeserializeOwned + Debug,
    <K as Resource>::DynamicType: Default,
{
    let probe = kube::api::ListParams::default().limit(1);
    match api::<K>(client, namespace).list_metadata(&probe).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("cannot list {what} ({e}); see the chart's RBAC: they are not watched");
            false
        }
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the compiler reads of an Ingress: everything but its status (and the server's bookkeeping).
fn ingress_fingerprint(ingress: &Ingress) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let meta = &ingress.metadata;
    (&meta.annotations, &meta.labels).hash(&mut hasher);
    serde_json::to_vec(&ingress.spec).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

/// How a failing watch is retried: exponential from 0.8 s, capped at 5 s (kube-rs and client-go cap
/// at 30 s), reset after 2 minutes without failures, each wait jittered. Against a real API server,
/// a 30 s cap meant a change made just after a 30 s outage reached traffic 40–60 s later: the watch
/// waited out its backoff, resumed, got 410 Gone (the history moved on) and waited again before
/// listing. Five seconds between attempts is still nothing for an API server to answer.
fn watch_backoff() -> ResetTimerBackoff<CappedBackoff> {
    ResetTimerBackoff::new(CappedBackoff::default(), Duration::from_secs(120))
}

/// 0.8 s, 1.6 s, 3.2 s, then 5 s between attempts — each drawn at random from its upper half
/// (0.4–0.8 s, 0.8–1.6 s, ...), so the replicas (and the watches of one replica) that all lost the
/// API server at once do not all come back in the same instant after it returns: the same idea as
/// kube-runtime's `DefaultBackoff`, whose jitter adds up to one more wait (which would stretch the
/// 5 s cap to 10 s).
#[derive(Debug, Clone, Copy)]
struct CappedBackoff {
    next: Duration,
    /// xorshift64 state, seeded at random per backoff.
    random: u64,
}

impl CappedBackoff {
    const FIRST: Duration = Duration::from_millis(800);
    const CAP: Duration = Duration::from_secs(5);

    /// A number in `[0, 1)`.
    fn draw(&mut self) -> f64 {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Default for CappedBackoff {
    fn default() -> Self {
        use std::hash::BuildHasher;
        // std's randomly keyed hasher over nothing: a random seed without a dependency (never 0,
        // which xorshift would keep).
        let seed = std::collections::hash_map::RandomState::new().hash_one(()) | 1;
        CappedBackoff { next: Self::FIRST, random: seed }
    }
}

impl Iterator for CappedBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let step = self.next;
        self.next = (self.next * 2).min(Self::CAP);
        Some(step.mul_f64(0.5 + self.draw() / 2.0))
    }
}

impl Backoff for CappedBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Starts a watcher feeding a store; each applied change or relist notifies `notify`.
fn reflect<K>(api: Api<K>, config: watcher::Config, notify: &[Arc<Notify>]) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    reflect_compiled(api, config, notify, None)
}

/// Notified when what the compiler reads of an object moved, and how to tell (a fingerprint of it).
type Compiled<K> = (Arc<Notify>, fn(&K) -> u64);

/// [`reflect`], and `compiled.0` is notified only when the object's fingerprint (`compiled.1`:
/// what the compiler reads of it) moved, or on deletes and relists.
fn reflect_compiled<K>(
    api: Api<K>,
    config: watcher::Config,
    notify: &[Arc<Notify>],
    compiled: Option<Compiled<K>>,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let (store, writer) = reflector::store();
    let mut notify = notify.to_vec();
    let (compile_notify, fingerprint) = match compiled {
        Some((n, f)) => (Some(n), Some(f)),
        None => (None, None),
    };
    if fingerprint.is_none() {
        notify.extend(compile_notify.clone());
    }
    let mut seen: HashMap<(Option<String>, Option<String>), u64> = HashMap::new();
    let kind = K::kind(&Default::default()).to_string();
    let stream = watcher::watcher(api, config)
        .backoff(watch_backoff())
        // managedFields are a large part of every object a real API server sends, and ramjet reads
        // only its own entry (status.rs: which Ingress status it wrote); the stores keep no other.
        .modify(|o: &mut K| {
            if let Some(fields) = o.meta_mut().managed_fields.as_mut() {
                fields.retain(|m| m.manager.as_deref() == Some(FIELD_MANAGER));
            }
        })
        .reflect(writer);
    tokio::spawn(async move {
        let mut failing = false;
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            // Whether the compiler needs to hear of this event (always, without a fingerprint).
            let mut compile = true;
            if let Some(fingerprint) = fingerprint {
                let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
                match &event {
                    Ok(Event::Init) => seen.clear(),
                    Ok(Event::InitApply(o)) => {
                        seen.insert(key(o), fingerprint(o));
                    }
                    Ok(Event::Apply(o)) => compile = seen.insert(key(o), fingerprint(o)) != Some(fingerprint(o)),
                    Ok(Event::Delete(o)) => {
                        seen.remove(&key(o));
                    }
                    _ => {}
                }
            }
            match event {
                Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => {
                    if failing {
                        tracing::info!(kind, "watch recovered");
                        failing = false;
                    }
                    for n in &notify {
                        n.notify_one();
                    }
                    if let (true, Some(_), Some(n)) = (compile, fingerprint, &compile_notify) {
                        n.notify_one();
                    }
                }
                Ok(Event::Init | Event::InitApply(_)) => {}
                Err(e) => {
                    // Retried with backoff by the stream; logged once per failing stretch at warn.
                    if failing {
                        tracing::debug!(kind, error = %e, "watch still failing");
                    } else {
                        tracing::warn!(kind, error = %e, "watch failed; retrying with backoff");
                        failing = true;
                    }
                }
            }
        }
    });
    store
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_backoff_is_capped_and_jittered() {
        let schedule = [0.8, 1.6, 3.2, 5.0, 5.0, 5.0];
        let waits = |backoff: &mut CappedBackoff| -> Vec<Duration> { backoff.take(schedule.len()).collect() };
        let mut first = CappedBackoff::default();
        let one = waits(&mut first);
        for (wait, step) in one.iter().zip(schedule) {
            let step = Duration::from_secs_f64(step);
            assert!(*wait >= step / 2 && *wait <= step, "{wait:?} outside [{:?}, {step:?}]", step / 2);
        }
        // Another replica's backoff waits otherwise (equal only by a 2^-53 chance per wait).
        assert_ne!(one, waits(&mut CappedBackoff::default()));
        // A reset starts again from the first step.
        first.reset();
        assert!(first.next().unwrap() <= CappedBackoff::FIRST);
    }
}
