//! The cluster source and the cluster writer: everything that talks to the Kubernetes API.
//!
//! ```text
//!  reflectors (IngressClass, Ingress, Service, EndpointSlice, tls Secrets; GatewayClass, Gateway,
//!  HTTPRoute, ReferenceGrant, Namespace once the cluster serves the Gateway API, at start or later)
//!        │                                                       ──▶ snapshot ──▶ Input::Objects
//!        │ (nothing is submitted before every first list is done)                  (rebuild loop)
//!        ▼
//!  status writers (Ingress; Gateway API, from the served generation's report) ◀── leader? (Lease) ──▶ warning Events for Ingresses that fail to compile
//!                          └──▶ canary auto-promotion (data-plane counters → canary-state annotation)
//!  audit Events (ConfigApplied / ConfigPinned / ConfigResumed on our IngressClass), every replica
//! ```
//!
//! All of it runs as tasks on the control thread's runtime; [`start`] connects (in-cluster
//! configuration or `--kubeconfig`) and spawns them. Writes follow DESIGN.md's "be a fixed point":
//! Events are created directly (never through an aggregating recorder) and a missing permission is
//! logged at debug and skipped; Ingress status and the canary-state annotation are written by the
//! elected replica only, with server-side apply (field manager `ramjet`) and only when they differ
//! from what is there.

pub mod events;
pub mod gateway_status;
pub mod lease;
pub mod peers;
pub mod promote;
pub mod status;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use ramjet_shared::Diagnostic;
use tokio::sync::{mpsc, watch as tokio_watch};

use crate::compile::snapshot::IngressOptions;
use crate::compile::status::PortFaults;
use crate::Input;

pub use events::{AuditEvents, AuditEventsReceiver};
pub use promote::PromotionContext;

/// The field manager of every server-side apply ramjet makes.
pub const FIELD_MANAGER: &str = "ramjet";

/// Where the addresses written into Ingress status come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StatusAddresses {
    /// Write no status.
    #[default]
    Nothing,
    /// `--publish-service NS/NAME`: that Service's load-balancer addresses.
    Service { namespace: String, name: String },
    /// `--publish-address`: these IPs or host names.
    Addresses(Vec<String>),
}

impl StatusAddresses {
    /// `--publish-service NS/NAME` or `--publish-address A[,B…]`; the service wins when both are given.
    pub fn from_flags(service: Option<&str>, address: Option<&str>) -> Result<Self, ClusterError> {
        if let Some(service) = service {
            let (namespace, name) = service
                .split_once('/')
                .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
                .ok_or_else(|| ClusterError::Flag(format!("--publish-service `{service}` is not NAMESPACE/NAME")))?;
            return Ok(StatusAddresses::Service { namespace: namespace.into(), name: name.into() });
        }
        match address {
            Some(a) => {
                let list: Vec<String> =
                    a.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
                if list.is_empty() {
                    return Err(ClusterError::Flag("--publish-address is empty".into()));
                }
                Ok(StatusAddresses::Addresses(list))
            }
            None => Ok(StatusAddresses::Nothing),
        }
    }
}

/// How the replica that writes status is elected.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// `--election-id`: the Lease's name.
    pub name: String,
    /// The Lease's namespace (`RAMJET_POD_NAMESPACE`; else the client's default namespace).
    pub namespace: Option<String>,
    /// This replica's identity (`POD_NAME`; else the host name).
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease.
    pub duration: Duration,
    /// How often the Lease is renewed or its expiry checked.
    pub retry: Duration,
}

impl LeaseOptions {
    pub fn new(name: impl Into<String>, namespace: Option<String>, identity: impl Into<String>) -> Self {
        LeaseOptions {
            name: name.into(),
            namespace,
            identity: identity.into(),
            duration: Duration::from_secs(15),
            retry: Duration::from_secs(2),
        }
    }
}

/// Everything the cluster source needs.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `--kubeconfig`; without it, the in-cluster configuration (or the usual kubeconfig lookup).
    pub kubeconfig: Option<PathBuf>,
    /// `--watch-namespace`; `None` watches every namespace.
    pub watch_namespace: Option<String>,
    pub ingress: IngressOptions,
    pub status_addresses: StatusAddresses,
    pub lease: LeaseOptions,
    /// The Events' `reportingInstance`.
    pub instance: String,
    /// The config path's one debounce: after a change, how long the watcher waits for more before
    /// it hands a snapshot to the rebuild loop (which compiles at once), so a burst of changes —
    /// a `kubectl apply` of many objects, a rollout's EndpointSlice updates — makes one compile.
    /// The status writers wait as long after the changes that wake them. 20 ms by default: well
    /// under what a person notices, and long enough for the events of one apply to arrive.
    pub debounce: Duration,
    /// Watch the Gateway API kinds (when the cluster serves them and ramjet may read them).
    pub gateway_api: bool,
    /// Which replicas write the audit Events of what they publish (`--audit-events`).
    pub audit_events: AuditEventsFrom,
}

/// Which replicas write an Event for each generation they publish, pin or resume. Every replica
/// publishes every change, so a large DaemonSet writes as many Events per change as it has pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuditEventsFrom {
    /// Every replica (the default): each pod's record of what it served.
    #[default]
    All,
    /// The Lease holder's publishes only; a pin or a resume is written by the replica it was
    /// made on, leader or not (an operator acted on that pod).
    Leader,
    /// None: the audit trail stays in `/admin/generations`, the log and the webhook.
    Off,
}

impl ClusterOptions {
    pub fn new(kubeconfig: Option<PathBuf>, ingress: IngressOptions, lease: LeaseOptions) -> Self {
        ClusterOptions {
            kubeconfig,
            watch_namespace: None,
            ingress,
            status_addresses: StatusAddresses::Nothing,
            instance: lease.identity.clone(),
            lease,
            debounce: Duration::from_millis(20),
            gateway_api: true,
            audit_events: AuditEventsFrom::All,
        }
    }
}

/// Why the cluster source could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A flag has a value that cannot be used.
    #[error("{0}")]
    Flag(String),
    /// The kubeconfig file could not be read.
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No usable configuration: neither in-cluster nor a kubeconfig.
    #[error("cannot find how to reach the Kubernetes API (not in a cluster, and no kubeconfig): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    /// A list request failed (`ramjet migration-report`).
    #[error("cannot list {what}: {source}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    /// The control thread stopped before the client was ready.
    #[error("the control thread stopped while connecting to the cluster")]
    Stopped,
    /// A get request failed (`ramjet migration-report --nginx-configmap`).
    #[error("cannot read {what}: {source}")]
    Get {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads the client configuration: `--kubeconfig`, else in-cluster, else the usual kubeconfig;
/// with `context`, that context of the kubeconfig (the given one, else the usual one).
async fn connect(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<(Client, String), ClusterError> {
    let options = KubeConfigOptions { context: context.map(str::to_string), ..KubeConfigOptions::default() };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kubeconfig_error = |source| ClusterError::Kubeconfig { path: path.display().to_string(), source };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(kubeconfig_error)?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|source| ClusterError::Kubeconfig { path: "the usual kubeconfig".into(), source })?,
        (None, None) => Config::infer().await?,
    };
    let namespace = config.default_namespace.clone();
    Ok((Client::try_from(config)?, namespace))
}

/// What `ramjet migration-report` compiles the Ingresses with: IngressClasses, and in `namespace`
/// (else every namespace) Ingresses, Services, EndpointSlices and TLS Secrets, listed once.
pub async fn list_snapshot(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    namespace: Option<&str>,
) -> Result<crate::compile::snapshot::ClusterSnapshot, ClusterError> {
    use k8s_openapi::api::core::v1::{Secret, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
    use kube::api::{Api, ListParams};
    use std::sync::Arc;
    let (client, _) = connect(kubeconfig, context).await?;
    async fn list<K>(api: Api<K>, what: &'static str, params: ListParams) -> Result<Vec<Arc<K>>, ClusterError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let list = api.list(&params).await.map_err(|source| ClusterError::List { what, source })?;
        Ok(list.items.into_iter().map(Arc::new).collect())
    }
    fn scoped<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let all = ListParams::default();
    Ok(crate::compile::snapshot::ClusterSnapshot {
        ingress_classes: list(Api::<IngressClass>::all(client.clone()), "IngressClasses", all.clone()).await?,
        ingresses: list(scoped::<Ingress>(&client, namespace), "Ingresses", all.clone()).await?,
        services: list(scoped::<Service>(&client, namespace), "Services", all.clone()).await?,
        endpoint_slices: list(scoped::<EndpointSlice>(&client, namespace), "EndpointSlices", all.clone()).await?,
        secrets: list(
            scoped::<Secret>(&client, namespace),
            "TLS Secrets",
            ListParams::default().fields(&format!("type={}", crate::compile::resolve::TLS_SECRET_TYPE)),
        )
        .await?,
        ..Default::default()
    })
}

/// The data of ConfigMap `namespace/name` (`ramjet migration-report --nginx-configmap`).
pub async fn get_configmap(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    namespace: &str,
    name: &str,
) -> Result<std::collections::BTreeMap<String, String>, ClusterError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::Api;
    let (client, _) = connect(kubeconfig, context).await?;
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let map = api
        .get(name)
        .await
        .map_err(|source| ClusterError::Get { what: format!("ConfigMap {namespace}/{name}"), source })?;
    Ok(map.data.unwrap_or_default())
}

/// The controller container's command line of ingress-nginx's Deployment `namespace/name`, else
/// its DaemonSet of that name (`ramjet migration-report --nginx-controller`), with the kind found.
pub async fn get_controller_args(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    namespace: &str,
    name: &str,
) -> Result<(&'static str, Vec<String>), ClusterError> {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use kube::api::Api;
    let (client, _) = connect(kubeconfig, context).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let (kind, value) = match deployments.get_opt(name).await {
        Ok(Some(d)) => ("Deployment", serde_yaml_ng::to_value(&d).unwrap_or_default()),
        Ok(None) => {
            let sets: Api<DaemonSet> = Api::namespaced(client, namespace);
            match sets.get(name).await {
                Ok(d) => ("DaemonSet", serde_yaml_ng::to_value(&d).unwrap_or_default()),
                Err(source) => {
                    return Err(ClusterError::Get {
                        what: format!("Deployment or DaemonSet {namespace}/{name}"),
                        source,
                    })
                }
            }
        }
        Err(source) => return Err(ClusterError::Get { what: format!("Deployment {namespace}/{name}"), source }),
    };
    Ok((kind, crate::migration::controller_flags::controller_args(&value)))
}

/// The running cluster source.
pub struct ClusterHandle {
    /// Stops the election; the election answers once the Lease is released.
    stop_election: Option<tokio::sync::oneshot::Sender<std::sync::mpsc::Sender<()>>>,
}

impl ClusterHandle {
    /// Stops competing for the Lease and gives it up if this replica holds it, so another replica
    /// takes over at once instead of after the lease duration. Waits up to `timeout`.
    pub fn release_lease(&mut self, timeout: Duration) {
        let Some(stop) = self.stop_election.take() else { return };
        let (done, released) = std::sync::mpsc::channel();
        if stop.send(done).is_ok() {
            let _ = released.recv_timeout(timeout);
        }
    }
}

/// Connects and starts the watcher and the writers on the control thread's runtime; returns once
/// the client is built (or could not be). Compiled snapshots go to `inputs`; `diagnostics` is the
/// rebuild loop's report of every compile; `audit` carries the audit records to turn into Events;
/// `promotion` is what canary auto-promotion reads; `port_faults` the route ports the data plane
/// could not open, for listener status.
pub fn start(
    runtime: &tokio::runtime::Handle,
    options: ClusterOptions,
    inputs: mpsc::UnboundedSender<Input>,
    diagnostics: tokio_watch::Receiver<Arc<[Diagnostic]>>,
    audit: AuditEventsReceiver,
    (promotion, port_faults): (PromotionContext, tokio_watch::Receiver<PortFaults>),
) -> Result<ClusterHandle, ClusterError> {
    let (ready, connected) = std::sync::mpsc::channel();
    let (stop_election, stop) = tokio::sync::oneshot::channel();
    runtime.spawn(async move {
        let (client, default_namespace) = match connect(options.kubeconfig.as_deref(), None).await {
            Ok(c) => c,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let writers = (promotion, port_faults);
        run(client, default_namespace, options, inputs, diagnostics, audit, writers, stop).await;
    });
    connected.recv().map_err(|_| ClusterError::Stopped)??;
    Ok(ClusterHandle { stop_election: Some(stop_election) })
}

/// Mirrors whether this replica leads into `ramjet_leader`.
async fn report_leadership(metrics: Arc<crate::metrics::ControlMetrics>, mut leader: tokio_watch::Receiver<bool>) {
    loop {
        let leading = *leader.borrow_and_update();
        metrics.leader.store(leading as u64, std::sync::atomic::Ordering::Relaxed);
        if leader.changed().await.is_err() {
            return;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    client: Client,
    default_namespace: String,
    options: ClusterOptions,
    inputs: mpsc::UnboundedSender<Input>,
    diagnostics: tokio_watch::Receiver<Arc<[Diagnostic]>>,
    audit: AuditEventsReceiver,
    (promotion, port_faults): (PromotionContext, tokio_watch::Receiver<PortFaults>),
    stop_election: tokio::sync::oneshot::Receiver<std::sync::mpsc::Sender<()>>,
) {
    let options = Arc::new(options);
    let stores = watch::Stores::start(&client, &options).await;
    let writer = events::EventWriter::new(client.clone(), &options);
    // The status writer and the Ingress warnings run only on the elected replica.
    let (leader_tx, leader) = tokio_watch::channel(false);
    tokio::spawn(events::write_audit(writer.clone(), stores.classes.clone(), options.clone(), audit, leader.clone()));
    let lease_namespace = options.lease.namespace.clone().unwrap_or(default_namespace);
    tokio::spawn(lease::elect(client.clone(), options.lease.clone(), lease_namespace, leader_tx, stop_election));
    tokio::spawn(events::report_diagnostics(writer.clone(), stores.ingresses.clone(), diagnostics, leader.clone()));
    let served = promotion.applier.served();
    tokio::spawn(report_leadership(promotion.applier.metrics().clone(), leader.clone()));
    tokio::spawn(promote::run(client.clone(), stores.clone(), promotion, leader.clone(), writer.clone()));
    let gateway_status =
        gateway_status::run(client.clone(), stores.clone(), options.clone(), leader.clone(), served, port_faults);
    tokio::spawn(gateway_status);
    tokio::spawn(status::run(client.clone(), stores.clone(), options.clone(), leader, writer));
    stores.feed(options, inputs).await;
}
