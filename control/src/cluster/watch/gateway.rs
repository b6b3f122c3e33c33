//! The Gateway API reflectors, and how they start: at once when the API server serves
//! `gateway.networking.k8s.io/v1` at start, or later, when a periodic look at discovery finds the
//! CRDs installed (users often install them after the ingress controller).
//!
//! The stores live in a [`GatewayCell`] that is set once, only after every Gateway API store has
//! finished its first list; whoever reads it (the snapshots, the Gateway API status writer) sees
//! either nothing or complete stores. Setting it wakes the compiler and the status writer.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use tokio::sync::Notify;

use super::{api, reflect, reflect_compiled};
use crate::cluster::ClusterOptions;
use crate::gateway_api::{
    BackendTlsPolicy, Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant, TcpRoute, TlsRoute, UdpRoute,
};

/// The Gateway API stores once they exist: set once, never replaced, cheap to clone.
pub type GatewayCell = Arc<OnceLock<GatewayStores>>;

/// The first look at discovery after a start without the Gateway API: soon, for CRDs installed in
/// the same `kubectl apply` or Helm run as ramjet (they become Established a second or two later).
const FIRST_RECHECK: Duration = Duration::from_secs(2);

/// Then one look every 10 s: three small GETs (a group's discovery document and two lists of at
/// most one object's metadata) per replica, about 0.3 requests a second — nothing for an API
/// server, even with many replicas — and a Gateway applied together with its CRDs is served
/// within about 10 s. Ramjet cannot watch CustomResourceDefinitions instead: the chart grants no
/// read of `apiextensions.k8s.io`, and should not need to.
const RECHECK: Duration = Duration::from_secs(10);

/// Why the Gateway API kinds cannot be watched (yet).
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// The API server does not serve `gateway.networking.k8s.io/v1`: its CRDs are not installed
    /// (or the API server could not be asked).
    #[error("the Gateway API (gateway.networking.k8s.io/v1) is not served by this cluster ({0}); install its CRDs")]
    NotServed(#[source] kube::Error),
    /// The group is served, but ramjet may not list this kind.
    #[error("cannot list {kind} ({source}); see the chart's RBAC")]
    CannotList {
        kind: &'static str,
        #[source]
        source: kube::Error,
    },
}

impl Unusable {
    /// The same reason (the errors' texts aside): a re-check that fails for a new reason says so.
    fn same_reason(&self, other: &Unusable) -> bool {
        match (self, other) {
            (Unusable::NotServed(_), Unusable::NotServed(_)) => true,
            (Unusable::CannotList { kind: a, .. }, Unusable::CannotList { kind: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// The Gateway API stores at start: none with `--gateway-api=false`; started at once when the
/// API server serves the kinds and ramjet may list them; otherwise the reason is logged once and
/// [`pick_up_later`] fills the cell when that changes.
pub(super) async fn start(client: &Client, options: &ClusterOptions, notify: [Arc<Notify>; 2]) -> GatewayCell {
    if !options.gateway_api {
        return GatewayCell::default();
    }
    let ns = options.watch_namespace.as_deref();
    match usable(client, ns).await {
        Ok(optional) => Arc::new(OnceLock::from(GatewayStores::start(client, ns, optional, notify))),
        Err(why) => {
            tracing::warn!(
                "{why}: Ingresses are served as usual, Gateways and HTTPRoutes once the Gateway API \
                 can be watched (checked every {RECHECK:?})"
            );
            let cell = GatewayCell::default();
            tokio::spawn(pick_up_later(client.clone(), options.watch_namespace.clone(), cell.clone(), notify, why));
            cell
        }
    }
}

/// Whether the Gateway API kinds can be watched: served by the API server (its CRDs installed)
/// and readable by ramjet. A watcher on a kind that cannot be listed would never finish its first
/// list, and nothing would ever be published: so this is asked before any watcher starts.
/// Which optional kinds can be watched too ([`Optional`]): without them HTTPRoutes are served all
/// the same.
async fn usable(client: &Client, namespace: Option<&str>) -> Result<Optional, Unusable> {
    let served = client.list_api_group_resources("gateway.networking.k8s.io/v1").await.map_err(Unusable::NotServed)?;
    let probe = kube::api::ListParams::default().limit(1);
    let classes: Api<GatewayClass> = Api::all(client.clone());
    let routes: Api<HttpRoute> = api(client, namespace);
    let cannot_list = |kind| move |source| Unusable::CannotList { kind, source };
    classes.list_metadata(&probe).await.map_err(cannot_list("GatewayClasses"))?;
    routes.list_metadata(&probe).await.map_err(cannot_list("HTTPRoutes"))?;
    let serves = |plural: &str| served.resources.iter().any(|r| r.name == plural);
    let grpc = serves("grpcroutes") && {
        let grpc: Api<GrpcRoute> = api(client, namespace);
        readable(grpc.list_metadata(&probe).await.map(drop), "GRPCRoutes")
    };
    if !serves("grpcroutes") {
        tracing::info!("the cluster serves no GRPCRoutes in gateway.networking.k8s.io/v1 (Gateway API CRDs older than v1.1): they are not watched");
    }
    // A BackendTLSPolicy names ConfigMaps: both are needed to honour one.
    let backend_tls = serves("backendtlspolicies") && {
        let policies: Api<BackendTlsPolicy> = api(client, namespace);
        let config_maps: Api<ConfigMap> = api(client, namespace);
        readable(policies.list_metadata(&probe).await.map(drop), "BackendTLSPolicies")
            && readable(config_maps.list_metadata(&probe).await.map(drop), "ConfigMaps (for BackendTLSPolicies)")
    };
    let tcp = serves("tcproutes") && {
        let routes: Api<TcpRoute> = api(client, namespace);
        readable(routes.list_metadata(&probe).await.map(drop), "TCPRoutes")
    };
    let tls = serves("tlsroutes") && {
        let routes: Api<TlsRoute> = api(client, namespace);
        readable(routes.list_metadata(&probe).await.map(drop), "TLSRoutes")
    };
    let udp = serves("udproutes") && {
        let routes: Api<UdpRoute> = api(client, namespace);
        readable(routes.list_metadata(&probe).await.map(drop), "UDPRoutes")
    };
    if !serves("backendtlspolicies") {
        tracing::info!("the cluster serves no BackendTLSPolicies in gateway.networking.k8s.io/v1 (Gateway API CRDs older than v1.4): they are not watched");
    }
    Ok(Optional { grpc, backend_tls, tcp, tls, udp })
}

/// The Gateway API kinds that are watched only where the cluster serves them and ramjet may list
/// them: CRDs of an older release serve fewer kinds, and an older chart's RBAC grants fewer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Optional {
    grpc: bool,
    /// BackendTLSPolicies, and the ConfigMaps their CA certificates are in.
    backend_tls: bool,
    /// TCPRoutes (served in v1 from Gateway API v1.5).
    tcp: bool,
    /// TLSRoutes (served in v1 from Gateway API v1.5).
    tls: bool,
    /// UDPRoutes (served in v1 from Gateway API v1.5).
    udp: bool,
}

/// Whether a probe list succeeded; why not is logged.
fn readable(listed: Result<(), kube::Error>, what: &str) -> bool {
    if let Err(e) = &listed {
        tracing::warn!("cannot list {what} ({e}); see the chart's RBAC: they are not watched");
    }
    listed.is_ok()
}

/// Looks at discovery every [`RECHECK`] (the first time after [`FIRST_RECHECK`]) until the Gateway
/// API is usable, then starts its reflectors, waits for their first lists, fills `cell` and
/// wakes `notify` (the compiler's and the Gateway API status writer's). `why` is the reason the
/// start gave (already logged); a new reason is logged once at warn, the same one at debug.
async fn pick_up_later(
    client: Client,
    namespace: Option<String>,
    cell: GatewayCell,
    notify: [Arc<Notify>; 2],
    mut why: Unusable,
) {
    tokio::time::sleep(FIRST_RECHECK).await;
    let optional = loop {
        match usable(&client, namespace.as_deref()).await {
            Ok(optional) => break optional,
            Err(now) if now.same_reason(&why) => tracing::debug!("{now}"),
            Err(now) => {
                tracing::warn!("{now}: Gateways and HTTPRoutes are still ignored (checked every {RECHECK:?})");
                why = now;
            }
        }
        tokio::time::sleep(RECHECK).await;
    };
    let stores = GatewayStores::start(&client, namespace.as_deref(), optional, notify.clone());
    stores.ready().await;
    // This task is the cell's only writer, and it was empty at start: this sets it.
    cell.get_or_init(|| stores);
    tracing::info!("Gateway API CRDs found: watching Gateways and HTTPRoutes");
    for n in &notify {
        n.notify_one();
    }
}

/// The Gateway API stores, and the Namespaces that listeners may select routes by.
#[derive(Clone)]
pub struct GatewayStores {
    pub classes: Store<GatewayClass>,
    pub gateways: Store<Gateway>,
    pub http_routes: Store<HttpRoute>,
    /// When the cluster serves GRPCRoutes and ramjet may list them.
    pub grpc_routes: Option<Store<GrpcRoute>>,
    pub grants: Store<ReferenceGrant>,
    pub namespaces: Store<Namespace>,
    /// BackendTLSPolicies, when the cluster serves them and ramjet may list them and the ConfigMaps
    /// their CA certificates are in (watched with the Ingress kinds).
    pub backend_tls: Option<Store<BackendTlsPolicy>>,
    pub tcp_routes: Option<Store<TcpRoute>>,
    pub tls_routes: Option<Store<TlsRoute>>,
    pub udp_routes: Option<Store<UdpRoute>>,
}

impl GatewayStores {
    /// `notify[0]` hears what the compiler reads (not status-only changes), `notify[1]` every change.
    pub(super) fn start(client: &Client, ns: Option<&str>, optional: Optional, notify: [Arc<Notify>; 2]) -> Self {
        let [compile, any] = notify;
        let both = [compile.clone(), any.clone()];
        let status_only = std::slice::from_ref(&any);
        GatewayStores {
            classes: reflect_compiled(
                Api::all(client.clone()),
                watcher::Config::default(),
                status_only,
                Some((compile.clone(), spec_fingerprint)),
            ),
            gateways: reflect_compiled(
                api(client, ns),
                watcher::Config::default(),
                status_only,
                Some((compile.clone(), spec_fingerprint)),
            ),
            http_routes: reflect_compiled(
                api(client, ns),
                watcher::Config::default(),
                status_only,
                Some((compile.clone(), spec_fingerprint)),
            ),
            grpc_routes: optional.grpc.then(|| {
                reflect_compiled(
                    api(client, ns),
                    watcher::Config::default(),
                    status_only,
                    Some((compile.clone(), spec_fingerprint)),
                )
            }),
            grants: reflect(api(client, ns), watcher::Config::default(), &both),
            namespaces: reflect(Api::all(client.clone()), watcher::Config::default(), &both),
            backend_tls: optional.backend_tls.then(|| {
                reflect_compiled(
                    api(client, ns),
                    watcher::Config::default(),
                    status_only,
                    Some((compile.clone(), spec_fingerprint)),
                )
            }),
            tcp_routes: optional.tcp.then(|| {
                reflect_compiled(
                    api(client, ns),
                    watcher::Config::default(),
                    status_only,
                    Some((compile.clone(), spec_fingerprint)),
                )
            }),
            tls_routes: optional.tls.then(|| {
                reflect_compiled(
                    api(client, ns),
                    watcher::Config::default(),
                    status_only,
                    Some((compile.clone(), spec_fingerprint)),
                )
            }),
            udp_routes: optional.udp.then(|| {
                reflect_compiled(
                    api(client, ns),
                    watcher::Config::default(),
                    status_only,
                    Some((compile.clone(), spec_fingerprint)),
                )
            }),
        }
    }

    /// Waits until every Gateway API store has finished its first list.
    pub(super) async fn ready(&self) {
        let _ = futures::join!(
            self.classes.wait_until_ready(),
            self.gateways.wait_until_ready(),
            self.http_routes.wait_until_ready(),
            async {
                if let Some(grpc) = &self.grpc_routes {
                    let _ = grpc.wait_until_ready().await;
                }
            },
            self.grants.wait_until_ready(),
            self.namespaces.wait_until_ready(),
            async {
                if let Some(routes) = &self.tcp_routes {
                    let _ = routes.wait_until_ready().await;
                }
            },
            async {
                if let Some(routes) = &self.tls_routes {
                    let _ = routes.wait_until_ready().await;
                }
            },
            async {
                if let Some(routes) = &self.udp_routes {
                    let _ = routes.wait_until_ready().await;
                }
            },
            async {
                if let Some(policies) = &self.backend_tls {
                    let _ = policies.wait_until_ready().await;
                }
            },
        );
    }
}

/// What the compiler reads of a Gateway API object: its labels, annotations and spec (its status
/// is ramjet's own output).
fn spec_fingerprint<K: Resource + serde::Serialize>(object: &K) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let meta = object.meta();
    (&meta.annotations, &meta.labels, &meta.generation).hash(&mut hasher);
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(o) = value.as_object_mut() {
        o.remove("status");
        o.remove("metadata");
    }
    value.to_string().hash(&mut hasher);
    hasher.finish()
}
