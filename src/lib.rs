//! The `ramjet` daemon, as a library: [`Daemon::start`] wires the control thread and the data plane
//! together the way the binary does, so tests and embedders run exactly the real thing.
//!
//! Start-up order: the admin port is bound first without SO_REUSEPORT (a second daemon is refused
//! there), the control thread starts and compiles the configuration, the first generation is
//! published, and only then do the workers bind their listeners and serve.
//!
//! The HTTPS listener is bound only where TLS can be served: always in cluster and `--manifests`
//! mode (a TLS Secret may arrive at any time, and the listener must already be there when it
//! does), and with static routes only when they have a `tls:` entry or a default certificate is
//! given (the file is compiled once; without a certificate every handshake would fail, and the
//! port would only stand in the way of another process).

pub mod cli;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use arc_swap::ArcSwap;
use ramjet_control::audit::{EventSink, Webhook};
use ramjet_control::cluster::{AuditEvents, ClusterOptions, PromotionContext};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_control::compile::status::PortFaults;
use ramjet_control::config_file::ControllerConfig;
use ramjet_control::dns::DnsSettings;
use ramjet_control::routes_file::StaticRoutes;
use ramjet_control::{Control, ControlConfig, ControlHandle, Input};
use ramjet_dataplane::{
    AccessLogSettings, DataPlane, DataPlaneConfig, DefaultCertificate, IoDriver, Settings, TraceSettings,
};
use ramjet_shared::{Published, WorkerStats};
use rustls::sign::CertifiedKey;

/// Where the configuration comes from.
// Built once at start-up and moved a few times: the cluster options' size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Source {
    /// `--static-routes FILE`, compiled once.
    Static(StaticRoutes),
    /// `--manifests DIR`: Kubernetes objects in files, re-read every `interval`.
    Manifests { dir: PathBuf, options: IngressOptions, interval: Duration },
    /// Watch a cluster.
    Cluster(ClusterOptions),
}

/// Everything the daemon needs, validated.
pub struct DaemonConfig {
    pub source: Source,
    pub http_addr: SocketAddr,
    /// Bound only when TLS can be served: see [`serves_https`].
    pub https_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// The read-only listener for probes and `/metrics` (`--metrics-addr`), when wanted.
    pub metrics_addr: Option<SocketAddr>,
    pub workers: usize,
    pub history_size: usize,
    pub admin_token: Option<String>,
    pub audit_webhook: Option<Webhook>,
    pub settings: Settings,
    pub io_driver: IoDriver,
    pub default_certificate: Option<Arc<CertifiedKey>>,
    pub pin_workers: bool,
    /// The access log (`None`: off).
    pub access_log: Option<AccessLogSettings>,
    /// Traces (`--otlp-endpoint`).
    pub traces: Option<TraceSettings>,
    /// `--peers`: the replicas' admin listeners, whose traffic canary promotion sums.
    pub peers: Vec<String>,
    /// `--config`: the controller configuration, as read at start, and its file, re-read on change.
    pub config: Option<ConfigFile>,
    /// How names outside the cluster are resolved (`--dns-server`, `--dns-min-ttl`, `--dns-max-ttl`).
    pub dns: DnsSettings,
}

/// The controller configuration file and what it said at start.
pub struct ConfigFile {
    pub path: PathBuf,
    pub config: ControllerConfig,
    /// The text it was read from (a change to it is read again).
    pub text: String,
    /// How often the file is looked at.
    pub interval: Duration,
}

impl ConfigFile {
    /// Reads `path` (a file, or a directory where a ConfigMap is mounted), or says which line and
    /// key of it is wrong.
    pub fn read(path: &std::path::Path) -> anyhow::Result<Self> {
        let (config, text) = ControllerConfig::read(path)?;
        Ok(ConfigFile { path: path.to_path_buf(), config, text, interval: Duration::from_secs(1) })
    }
}

impl DaemonConfig {
    /// Defaults for tests and embedders: loopback, ephemeral ports, two workers.
    pub fn local(routes: StaticRoutes) -> Self {
        Self::with_source(Source::Static(routes))
    }

    /// The same defaults with another configuration source.
    pub fn with_source(source: Source) -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        DaemonConfig {
            source,
            http_addr: any,
            https_addr: any,
            admin_addr: any,
            metrics_addr: None,
            workers: 2,
            history_size: 10,
            admin_token: None,
            audit_webhook: None,
            settings: Settings::default(),
            io_driver: IoDriver::Auto,
            default_certificate: None,
            pin_workers: false,
            access_log: None,
            traces: None,
            peers: Vec::new(),
            config: None,
            dns: DnsSettings::default(),
        }
    }
}

/// A running daemon.
pub struct Daemon {
    pub control: ControlHandle,
    /// The cluster source, when watching a cluster.
    pub cluster: Option<ramjet_control::cluster::ClusterHandle>,
    pub dataplane: DataPlane,
    pub published: Arc<Published>,
    pub stats: Arc<WorkerStats>,
    /// The certificate for names without one: `--default-certificate`, else a self-signed one.
    /// Storing a new one serves it from the next handshake on.
    pub default_certificate: DefaultCertificate,
}

/// Whether the HTTPS listener is bound: in cluster and `--manifests` mode always (certificates may
/// arrive later); with static routes, which are compiled once, only when they name a certificate or
/// a default certificate is given.
pub fn serves_https(source: &Source, default_certificate: bool) -> bool {
    match source {
        Source::Static(routes) => default_certificate || !routes.tls.is_empty(),
        Source::Manifests { .. } | Source::Cluster(_) => true,
    }
}

/// Installs the ring crypto provider once per process (the default features would pull aws-lc-rs).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Reads the admin token; a missing or empty file is an error. Whitespace around it is ignored
/// (a Secret created from a file often ends in a newline).
pub fn read_token(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--admin-token-file {}: cannot read", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("--admin-token-file {}: the file is empty; put the token in it", path.display());
    }
    Ok(token.to_string())
}

/// Keeps the sockets of TCP, UDP and TLS routes those of the generation being served: after each
/// publish (a new table, a rollback, a pin released), the ports it has are opened and the others
/// closed. A port that cannot be opened is logged, told to the Gateway status writer (`faults`),
/// and tried again every [`PORT_RETRY`] and at the next publish.
async fn open_route_ports(
    mut ports: ramjet_dataplane::PortOpener,
    mut served: tokio::sync::watch::Receiver<Option<ramjet_control::apply::Compiled>>,
    faults: tokio::sync::watch::Sender<PortFaults>,
) {
    loop {
        let wanted: Vec<(ramjet_shared::Transport, u16)> =
            served.borrow_and_update().as_ref().map(|c| c.generation.table.route_ports().collect()).unwrap_or_default();
        let mut now = std::collections::BTreeMap::new();
        for ((transport, port), e) in ports.sync(wanted) {
            let why = format!("ramjet cannot listen on {transport} port {port}: {e}");
            if !faults.borrow().contains_key(&(transport, port)) {
                tracing::warn!(%transport, port, error = %e, "cannot open a route's port; it is tried again");
            }
            now.insert((transport, port), why);
        }
        let retry = !now.is_empty();
        faults.send_if_modified(|held| {
            let changed = **held != now;
            if changed {
                *held = Arc::new(now);
            }
            changed
        });
        tokio::select! {
            changed = served.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(PORT_RETRY), if retry => {}
        }
    }
}

/// How often a route port that could not be opened is tried again.
const PORT_RETRY: Duration = Duration::from_secs(5);

impl Daemon {
    pub fn start(config: DaemonConfig) -> anyhow::Result<Daemon> {
        install_crypto();
        let admin = TcpListener::bind(config.admin_addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                anyhow::anyhow!("admin address {} is already in use (is another ramjet running?)", config.admin_addr)
            }
            _ => anyhow::anyhow!("cannot listen on the admin address {}: {e}", config.admin_addr),
        })?;
        let metrics_listener = config
            .metrics_addr
            .map(|addr| TcpListener::bind(addr).with_context(|| format!("cannot listen on the metrics address {addr}")))
            .transpose()?;
        let workers = if config.workers == 0 { ramjet_dataplane::default_workers() } else { config.workers };
        let https = serves_https(&config.source, config.default_certificate.is_some());
        // A name without a certificate gets the default one, else a self-signed one: a handshake
        // and an HTTP answer rather than a TLS alert.
        let default_certificate = match config.default_certificate {
            Some(default) => default,
            None => ramjet_control::certs::fallback_certificate().context("cannot make the fallback certificate")?,
        };
        let default_certificate = Arc::new(ArcSwap::new(default_certificate));
        let published = Arc::new(Published::new());
        let stats = Arc::new(WorkerStats::new(workers));
        let mut event_sinks: Vec<Arc<dyn EventSink>> = Vec::new();
        let mut audit_events = None;
        if let Source::Cluster(_) = &config.source {
            let (sink, records) = AuditEvents::channel();
            event_sinks.push(sink);
            audit_events = Some(records);
        }
        let control = Control::start(ControlConfig {
            published: published.clone(),
            worker_stats: stats.clone(),
            history_size: config.history_size,
            admin_listener: admin,
            metrics_listener,
            admin_token: config.admin_token,
            audit_webhook: config.audit_webhook,
            event_sinks,
            build: ramjet_control::metrics::BuildInfo {
                version: env!("CARGO_PKG_VERSION").into(),
                commit: env!("RAMJET_COMMIT").into(),
                date: env!("RAMJET_COMMIT_DATE").into(),
            },
            dns: config.dns,
        })?;
        if let Some(file) = config.config {
            control.submit(Input::Config(Arc::new(file.config)));
            let inputs = control.inputs();
            let submit = move |config| {
                let _ = inputs.send(Input::Config(Arc::new(config)));
            };
            control.runtime.spawn(ramjet_control::config_file::watch(file.path, file.interval, file.text, submit));
        }
        let mut cluster = None;
        // The route ports the data plane cannot open, for the Gateway status writer.
        let (port_faults, faults_seen) = tokio::sync::watch::channel(PortFaults::default());
        let ready_within = match config.source {
            Source::Static(routes) => {
                control.submit(Input::Static(Arc::new(routes)));
                Duration::from_secs(30)
            }
            Source::Manifests { dir, options, interval } => {
                let inputs = control.inputs();
                let submit = move |snapshot| {
                    let _ = inputs.send(Input::Objects(Arc::new(snapshot)));
                };
                control.runtime.spawn(ramjet_control::manifests::watch(dir, Arc::new(options), interval, submit));
                Duration::from_secs(30)
            }
            Source::Cluster(options) => {
                let records = audit_events.take().context("audit events")?;
                let promotion = PromotionContext {
                    stats: stats.clone(),
                    applier: control.applier.clone(),
                    audit: control.audit.clone(),
                    plans: control.canaries(),
                    peers: config.peers.clone(),
                    instance: control.instance.clone(),
                };
                cluster = Some(ramjet_control::cluster::start(
                    &control.runtime,
                    options,
                    control.inputs(),
                    control.diagnostics(),
                    records,
                    (promotion, faults_seen.clone()),
                )?);
                // Every first list must finish before the first generation; a large cluster takes a while.
                Duration::from_secs(120)
            }
        };
        if !control.wait_ready(ready_within) {
            bail!("the first configuration was not published within {}", humantime::format_duration(ready_within));
        }
        let https = if https {
            let tls = ramjet_dataplane::server_config(published.clone(), default_certificate.clone())
                .context("cannot set up TLS")?;
            Some((config.https_addr, tls))
        } else {
            None
        };
        let dataplane = DataPlane::start(
            DataPlaneConfig {
                workers,
                http_addr: config.http_addr,
                https,
                settings: config.settings,
                io_driver: config.io_driver,
                pin_workers: config.pin_workers,
                access_log: config.access_log,
                traces: config.traces,
            },
            published.clone(),
            stats.clone(),
        )?;
        let mut dataplane = dataplane;
        if let Some(opener) = dataplane.take_port_opener() {
            control.runtime.spawn(open_route_ports(opener, control.applier.served(), port_faults));
        }
        control.mark_listening();
        Ok(Daemon { control, cluster, dataplane, published, stats, default_certificate })
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.dataplane.http_addr
    }

    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.dataplane.https_addr
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.control.admin_addr
    }

    /// The read-only listener's address (`--metrics-addr`), when there is one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.control.metrics_addr
    }

    /// Reopens the access log's file (SIGHUP: logrotate moved it away).
    pub fn reopen_access_log(&self) {
        self.dataplane.reopen_access_log();
    }

    /// Feeds a new static configuration through the compiler (tests and embedders; the daemon
    /// compiles its file once).
    pub fn submit(&self, routes: StaticRoutes) {
        self.control.submit(Input::Static(Arc::new(routes)));
    }

    /// The first step of a shutdown, while the data plane still serves: `/readyz` fails, HTTP/1.1
    /// answers say `Connection: close` (busy keep-alive clients move on during the delay), and the
    /// Lease (cluster mode) is given up, so another replica takes over writing status at once,
    /// not after the lease expires.
    pub fn begin_shutdown(&mut self) {
        self.control.mark_terminating();
        self.dataplane.begin_closing();
        if let Some(cluster) = &mut self.cluster {
            cluster.release_lease(Duration::from_secs(5));
        }
    }

    /// [`Daemon::begin_shutdown`] if it was not called, then stops accepting, lets in-flight
    /// requests finish, and stops the control thread.
    pub fn shutdown(mut self) {
        self.begin_shutdown();
        self.dataplane.join();
        self.control.shutdown();
    }
}
