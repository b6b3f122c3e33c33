//! The control thread: everything that talks to the cluster or to operators, on one OS thread
//! (`ramjet-control`) running a single-threaded tokio runtime.
//!
//! ```text
//! source (static file, API) ─▶ rebuild loop ─▶ compile (pure) ─▶ latest-value channel ─▶ applier
//!                                                                                        │
//!              admin listener (axum) ◀── history ring, pin ◀────────────────────────────┤
//!                                                     audit trail (log, Events, webhook) ◀┘
//! ```
//!
//! The applier publishes through [`ramjet_shared::Published`] — certificates, then table — and the
//! data plane never waits for any of this. "Publish", "published", "serving" and "apply" each mean
//! one thing, listed in `ramjet_shared`'s crate documentation.
//!
//! Modules by concern: [`routes_file`] reads `--static-routes`, [`manifests`] reads `--manifests`,
//! [`cluster`] watches and writes to the Kubernetes API (named so it does not shadow the `kube`
//! crate); [`compile`] turns any of them into a table ([`compile::static_routes`] for a routes
//! file, [`compile::cluster`] for Kubernetes objects: Ingresses, then the Gateway API's objects
//! ([`gateway_api`]), with the status the Gateway API objects get); [`apply`] publishes; [`audit`] says what
//! changed; [`admin`] answers operators; [`migration`] reports, before a switch from ingress-nginx,
//! what ramjet does with each Ingress's annotations ([`compile::annotations`]); [`canary`] reads
//! canary and mirror annotations, and [`canary::promotion`] decides auto-promotion, whose I/O is
//! [`cluster::promote`] (the rebuild loop hands it each compile's auto-promoting canaries,
//! [`ControlHandle::canaries`]; [`cluster::peers`] brings the other replicas' figures). Two more
//! inputs are compiled with whatever routes were given last: the controller configuration
//! ([`config_file`], `--config`) and the DNS answers for names outside the cluster ([`dns`], which
//! resolves what the last compile asked for). [`Control::start`] runs it; [`ControlHandle::submit`]
//! feeds it new configurations (the daemon does so once for `--static-routes`; tests and embedders
//! may do it as often as they like). The control thread and its blocking pool run at a lower
//! priority than the workers (`priority`).

pub mod admin;
pub mod apply;
pub mod audit;
pub mod canary;
pub mod certs;
pub mod cluster;
pub mod compile;
pub mod config_file;
pub mod dns;
pub mod gateway_api;
pub mod history;
pub mod latest;
pub mod manifests;
pub mod metrics;
pub mod migration;
mod priority;
pub mod routes_file;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ramjet_shared::{Diagnostic, Published, WorkerStats};
use tokio::sync::{mpsc, oneshot, watch};

use apply::{Applier, Compiled};
use audit::{AuditTrail, EventSink, Webhook};
use canary::promotion::CanaryPlan;
use compile::snapshot::ClusterSnapshot;
use compile::Compiler;
use metrics::{ControlMetrics, MetricsSources};
use routes_file::StaticRoutes;

/// A configuration to compile.
#[derive(Debug, Clone)]
pub enum Input {
    Static(Arc<StaticRoutes>),
    /// Kubernetes objects, from the cluster or a manifests directory.
    Objects(Arc<ClusterSnapshot>),
    /// The controller configuration (`--config`), compiled with the routes last given.
    Config(Arc<config_file::ControllerConfig>),
    /// What the names outside the cluster resolve to now ([`dns`]), compiled with the routes last given.
    Dns(Arc<dns::DnsAnswers>),
}

/// What the control thread needs.
pub struct ControlConfig {
    pub published: Arc<Published>,
    pub worker_stats: Arc<WorkerStats>,
    pub history_size: usize,
    /// Bound by the caller (so a port in use is refused before anything starts).
    pub admin_listener: std::net::TcpListener,
    /// The read-only listener for probes and `/metrics` (`--metrics-addr`), bound by the caller.
    pub metrics_listener: Option<std::net::TcpListener>,
    pub admin_token: Option<String>,
    pub audit_webhook: Option<Webhook>,
    pub event_sinks: Vec<Arc<dyn EventSink>>,
    /// Which build this is (`ramjet_build_info`).
    pub build: metrics::BuildInfo,
    /// How names outside the cluster are resolved.
    pub dns: dns::DnsSettings,
}

/// Why the control thread did not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The tokio runtime or the admin listener could not be set up.
    #[error("control thread: {0}")]
    Start(#[from] std::io::Error),
}

pub struct Control;

/// The running control thread.
pub struct ControlHandle {
    thread: Option<JoinHandle<()>>,
    inputs: mpsc::UnboundedSender<Input>,
    shutdown: Option<oneshot::Sender<()>>,
    pub applier: Arc<Applier>,
    pub admin_addr: SocketAddr,
    /// Where the read-only listener is bound, when there is one.
    pub metrics_addr: Option<SocketAddr>,
    pub metrics: Arc<ControlMetrics>,
    /// The control thread's runtime, for sources that run beside the rebuild loop (the watcher).
    pub runtime: tokio::runtime::Handle,
    diagnostics: watch::Receiver<Arc<[Diagnostic]>>,
    canaries: watch::Receiver<Arc<[CanaryPlan]>>,
    /// The audit channels, for decisions made outside the applier (canary promotion).
    pub audit: AuditTrail,
    /// This process's random id, as the admin API reports it (`GET /admin/traffic`).
    pub instance: String,
    listening: Arc<AtomicBool>,
    terminating: Arc<AtomicBool>,
}

impl Control {
    pub fn start(config: ControlConfig) -> Result<ControlHandle, ControlError> {
        let metrics = Arc::new(ControlMetrics::default());
        let audit = AuditTrail { sinks: config.event_sinks, webhook: config.audit_webhook.clone() };
        let applier =
            Arc::new(Applier::new(config.published.clone(), config.history_size, audit.clone(), metrics.clone()));
        let admin_addr = config.admin_listener.local_addr()?;
        config.admin_listener.set_nonblocking(true)?;
        let metrics_addr = config.metrics_listener.as_ref().map(|l| l.local_addr()).transpose()?;
        if let Some(l) = &config.metrics_listener {
            l.set_nonblocking(true)?;
        }
        let instance = instance_id();
        let listening = Arc::new(AtomicBool::new(false));
        let terminating = Arc::new(AtomicBool::new(false));
        let admin_state = Arc::new(admin::AdminState {
            applier: applier.clone(),
            metrics: MetricsSources {
                control: metrics.clone(),
                workers: config.worker_stats,
                webhook: config.audit_webhook.as_ref().map(|w| (w.delivered.clone(), w.failures.clone())),
                history_size: config.history_size,
                published: config.published.clone(),
                build: config.build.clone(),
            },
            token_digest: config.admin_token.as_deref().map(admin::token_digest),
            instance: instance.clone(),
            listening: listening.clone(),
            terminating: terminating.clone(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_start(priority::yield_to_workers)
            .build()?;
        let (inputs, inputs_rx) = mpsc::unbounded_channel();
        let dns_inputs = inputs.clone();
        let dns_settings = config.dns;
        let (shutdown, shutdown_rx) = oneshot::channel();
        let (diagnostics_tx, diagnostics) = watch::channel(Arc::from(Vec::new()));
        let (canaries_tx, canaries) = watch::channel(Arc::from(Vec::new()));
        let handle = runtime.handle().clone();
        let listener = config.admin_listener;
        let metrics_listener = config.metrics_listener;
        let thread_applier = applier.clone();
        let thread_metrics = metrics.clone();
        let thread = std::thread::Builder::new().name("ramjet-control".into()).spawn(move || {
            priority::yield_to_workers();
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot register the admin listener");
                        return;
                    }
                };
                let (generations, generations_rx) = latest::latest();
                let (dns_names, dns_wanted) = watch::channel(std::collections::BTreeSet::new());
                tokio::spawn(dns::run(dns_settings, dns_wanted, move |answers| {
                    let _ = dns_inputs.send(Input::Dns(answers));
                }));
                let outputs = Outputs {
                    generations,
                    metrics: thread_metrics,
                    diagnostics: diagnostics_tx,
                    canaries: canaries_tx,
                    dns_names,
                };
                tokio::spawn(rebuild(inputs_rx, outputs));
                let applier = thread_applier.clone();
                tokio::spawn(async move {
                    loop {
                        let generation = generations_rx.recv().await;
                        // Off the control thread, like the compile: diffing a large table takes a while.
                        let applier = applier.clone();
                        let applied = tokio::task::spawn_blocking(move || {
                            let _span =
                                tracing::info_span!("apply", generation = generation.generation.number).entered();
                            applier.apply(generation);
                        });
                        if let Err(e) = applied.await {
                            tracing::error!(error = %e, "applying a generation failed");
                        }
                    }
                });
                let applier = thread_applier.clone();
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(Duration::from_secs(5));
                    loop {
                        tick.tick().await;
                        applier.prune();
                    }
                });
                // Ends with the runtime, when the admin listener below has shut down.
                if let Some(l) =
                    metrics_listener.map(tokio::net::TcpListener::from_std).transpose().unwrap_or_else(|e| {
                        tracing::error!(error = %e, "cannot register the metrics listener");
                        None
                    })
                {
                    let router = admin::health_router(admin_state.clone());
                    tokio::spawn(async move {
                        if let Err(e) = axum::serve(l, router).await {
                            tracing::error!(error = %e, "metrics listener failed");
                        }
                    });
                }
                let server = axum::serve(listener, admin::router(admin_state)).with_graceful_shutdown(async move {
                    let _ = shutdown_rx.await;
                });
                if let Err(e) = server.await {
                    tracing::error!(error = %e, "admin listener failed");
                }
            });
        })?;
        Ok(ControlHandle {
            thread: Some(thread),
            inputs,
            shutdown: Some(shutdown),
            applier,
            admin_addr,
            metrics_addr,
            metrics,
            runtime: handle,
            diagnostics,
            canaries,
            audit,
            instance,
            listening,
            terminating,
        })
    }
}

/// A random 64-bit id in hex, new at every start: std's randomly keyed hasher over nothing.
fn instance_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    format!("{:016x}", std::collections::hash_map::RandomState::new().build_hasher().finish())
}

impl ControlHandle {
    /// Hands a new configuration to the rebuild loop. Compiling it to the table already compiled
    /// produces no generation.
    pub fn submit(&self, input: Input) {
        let _ = self.inputs.send(input);
    }

    /// A sender for new configurations, for sources that run on their own.
    pub fn inputs(&self) -> mpsc::UnboundedSender<Input> {
        self.inputs.clone()
    }

    /// The diagnostics of the latest compile — also of compiles that produced no new generation
    /// (an object that fails to compile does not change the table).
    pub fn diagnostics(&self) -> watch::Receiver<Arc<[Diagnostic]>> {
        self.diagnostics.clone()
    }

    /// The auto-promoting canaries of the latest compile.
    pub fn canaries(&self) -> watch::Receiver<Arc<[CanaryPlan]>> {
        self.canaries.clone()
    }

    /// Waits until the first generation is published, up to `timeout`.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.applier.is_ready() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Says the data plane's listeners are bound: `/readyz` answers 200 from now on.
    pub fn mark_listening(&self) {
        self.listening.store(true, Ordering::Release);
    }

    /// Says the daemon is shutting down: `/readyz` fails from now on (the data plane keeps
    /// serving until it is drained).
    pub fn mark_terminating(&self) {
        self.terminating.store(true, Ordering::Release);
    }

    /// Stops the admin listener and the control thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ControlHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Compiles each new input (the newest of a burst) and offers the result to the applier.
///
/// The compile itself runs on tokio's blocking pool, never on the control thread: a large cluster
/// takes long enough to compile that the admin listener and the Lease renewal, which share the
/// control thread, would otherwise stall behind it. One compile runs at a time (the compiler's
/// state moves into it and back); inputs that arrive meanwhile coalesce to the newest. There is no
/// wait here: the cluster watcher debounces its changes ([`cluster::ClusterOptions::debounce`]),
/// and the other sources submit whole configurations.
///
/// A compile whose table is the one compiled last makes no new generation, but the objects may
/// say something new about themselves (a route's `metadata.generation` moved, so must its
/// status's `observedGeneration`): that generation is offered again with the new status report.
/// Where [`rebuild`]'s results go.
struct Outputs {
    generations: latest::LatestSender<Compiled>,
    metrics: Arc<ControlMetrics>,
    diagnostics: watch::Sender<Arc<[Diagnostic]>>,
    canaries: watch::Sender<Arc<[CanaryPlan]>>,
    /// The names outside the cluster the last compile needed, for [`dns::run`].
    dns_names: watch::Sender<std::collections::BTreeSet<String>>,
}

async fn rebuild(mut inputs: mpsc::UnboundedReceiver<Input>, outputs: Outputs) {
    let Outputs { generations, metrics, diagnostics, canaries, dns_names } = outputs;
    let mut compiler = Compiler::new();
    let mut last: Option<Compiled> = None;
    // The routes last given, compiled again when the configuration or DNS answers change.
    let mut routes: Option<Input> = None;
    let mut config = compiler.config.clone();
    let mut dns = compiler.dns.clone();
    while let Some(mut input) = inputs.recv().await {
        loop {
            match input {
                Input::Config(newer) => config = newer,
                Input::Dns(newer) => dns = newer,
                given => routes = Some(given),
            }
            match inputs.try_recv() {
                Ok(newer) => input = newer,
                Err(_) => break,
            }
        }
        let Some(input) = routes.clone() else { continue };
        compiler.config = config.clone();
        compiler.dns = dns.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut draft = match &input {
                Input::Static(routes) => compile::static_routes::compile(routes, &mut compiler),
                Input::Objects(snapshot) => compile::cluster::compile(snapshot, &mut compiler),
                Input::Config(_) | Input::Dns(_) => unreachable!("kept apart from the routes"),
            };
            let names = std::mem::take(&mut draft.dns_names);
            let mut found = draft.diagnostics.clone();
            found.sort();
            found.dedup();
            let plans = std::mem::take(&mut draft.canaries);
            let gateway_status = std::mem::take(&mut draft.gateway_status);
            let generation = compiler.finish(draft);
            (compiler, found, plans, generation, gateway_status, names, started.elapsed())
        })
        .await;
        let (returned, found, plans, generation, gateway_status, names, took) = match compiled {
            Ok(compiled) => compiled,
            Err(e) => {
                // A compile that panicked: keep serving what is published and compile the next input
                // from scratch.
                tracing::error!(error = %e, "the compiler failed; waiting for the next change");
                compiler = Compiler::new();
                compiler.config = config.clone();
                compiler.dns = dns.clone();
                last = None;
                continue;
            }
        };
        compiler = returned;
        dns_names.send_if_modified(|wanted| {
            let changed = *wanted != names;
            if changed {
                *wanted = names;
            }
            changed
        });
        metrics.compiles.fetch_add(1, Relaxed);
        metrics.diagnostics.store(found.len() as u64, Relaxed);
        diagnostics.send_if_modified(|d| {
            let changed = **d != *found;
            if changed {
                *d = found.into();
            }
            changed
        });
        canaries.send_if_modified(|c| {
            let changed = **c != *plans;
            if changed {
                *c = plans.into();
            }
            changed
        });
        match (generation, &mut last) {
            (Some(generation), _) => {
                metrics.generations_compiled.fetch_add(1, Relaxed);
                tracing::debug!(generation = generation.number, ?took, "compiled");
                let compiled = Compiled { generation: Arc::new(generation), gateway_status: Arc::new(gateway_status) };
                last = Some(compiled.clone());
                generations.send(compiled);
            }
            (None, Some(last)) if *last.gateway_status != gateway_status => {
                last.gateway_status = Arc::new(gateway_status);
                generations.send(last.clone());
            }
            (None, _) => {}
        }
    }
}
