//! `ramjet`: the daemon. Parses flags, validates everything before binding a port, starts the
//! [`ramjet::Daemon`], and drains on SIGTERM or SIGINT.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ramjet::cli::{
    AuditEventsArg, Cli, Command, IoDriverArg, LogFormat, MigrationReportArgs, ReportFormat, DEFAULT_HTTPS_ADDR,
};
use ramjet::{read_token, Daemon, DaemonConfig, Source};
use ramjet_control::audit::Webhook;
use ramjet_control::certs::parse_certificate;
use ramjet_control::cluster::{AuditEventsFrom, ClusterOptions, LeaseOptions, StatusAddresses};
use ramjet_control::compile::cluster;
use ramjet_control::compile::ingress::{self, IngressOptions};
use ramjet_control::compile::Compiler;
use ramjet_control::config_file::ControllerConfig;
use ramjet_control::manifests;
use ramjet_control::migration::{configmap, controller_flags, Report};
use ramjet_control::routes_file;
use ramjet_dataplane::access_log::Destination;
use ramjet_dataplane::{IoDriver, Settings};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    if let Some(Command::Completions { shell }) = cli.command {
        // Into a buffer first: the generator panics on a write error (`| head`).
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "ramjet", &mut script);
        return match std::io::Write::write_all(&mut std::io::stdout(), &script) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ramjet completions: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Some(Command::MigrationReport(args)) = &cli.command {
        return match migration_report(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("ramjet migration-report: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ramjet: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_env("RAMJET_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only for a terminal: `kubectl logs`, files and log pipelines get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Prints the report; `Ok(true)` when it is clean.
fn migration_report(args: &MigrationReportArgs) -> anyhow::Result<bool> {
    let context = args.context.as_deref();
    // ingress-nginx's controller flags, when its workload is named.
    let controller = match &args.nginx_controller {
        None => None,
        Some((namespace, name)) => {
            let (kind, line) = match &args.manifests {
                Some(dir) => {
                    let kinds = ["Deployment", "DaemonSet"];
                    let found = ramjet_control::migration::find_object_in_dir(dir, &kinds, namespace, name)
                        .with_context(|| format!("reading {}", dir.display()))?
                        .with_context(|| {
                            format!("no Deployment or DaemonSet {namespace}/{name} in {}", dir.display())
                        })?;
                    let kind = if found.get("kind").and_then(|k| k.as_str()) == Some("DaemonSet") {
                        "DaemonSet"
                    } else {
                        "Deployment"
                    };
                    (kind, controller_flags::controller_args(&found))
                }
                None => {
                    ramjet::install_crypto();
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                    let read = ramjet_control::cluster::get_controller_args(
                        args.kubeconfig.as_deref(),
                        context,
                        namespace,
                        name,
                    );
                    runtime.block_on(read)?
                }
            };
            Some(controller_flags::review(&format!("{kind} {namespace}/{name}"), namespace, &line))
        }
    };
    // The controller ConfigMap: the one named, else the one the controller's --configmap names.
    let configmap = args.nginx_configmap.clone().or_else(|| controller.as_ref().and_then(|c| c.configmap.clone()));
    // ingress-nginx's controller ConfigMap, when named: judged, and the Ingresses compiled with it.
    let settings = match &configmap {
        None => None,
        Some((namespace, name)) => {
            let data = match &args.manifests {
                Some(dir) => configmap::find_in_dir(dir, namespace, name)
                    .with_context(|| format!("reading {}", dir.display()))?
                    .with_context(|| format!("no ConfigMap {namespace}/{name} in {}", dir.display()))?,
                None => {
                    ramjet::install_crypto();
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                    let read =
                        ramjet_control::cluster::get_configmap(args.kubeconfig.as_deref(), context, namespace, name);
                    runtime.block_on(read)?
                }
            };
            let source = format!("ConfigMap {namespace}/{name}");
            let config = ControllerConfig::from_data(&data, Path::new(&source), "")?;
            Some((configmap::review(&format!("{namespace}/{name}"), &data), config))
        }
    };
    // The Ingresses and what they refer to: compiled as ramjet would serve them.
    let snapshot = match &args.manifests {
        Some(dir) => {
            let snapshot = manifests::load(dir, Arc::new(IngressOptions::default()))?;
            for d in snapshot.diagnostics.iter().chain(&snapshot.not_read) {
                eprintln!("{}: {}: {}", d.severity.as_str(), d.object, d.message);
            }
            snapshot
        }
        None => {
            ramjet::install_crypto();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let listed =
                ramjet_control::cluster::list_snapshot(args.kubeconfig.as_deref(), context, args.namespace.as_deref());
            runtime.block_on(listed)?
        }
    };
    let ingresses: Vec<_> = snapshot.ingresses.iter().map(|i| (**i).clone()).collect();
    let config = settings.as_ref().map(|(_, config)| config.clone()).unwrap_or_else(ControllerConfig::builtin);
    // Names outside the cluster are looked up as the daemon would, once.
    let dns = ramjet_control::dns::DnsSettings {
        servers: (!args.dns_server.is_empty()).then(|| args.dns_server.clone()),
        ..Default::default()
    };
    let resolve = |names: &std::collections::BTreeSet<String>| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        match runtime {
            Ok(runtime) => runtime.block_on(ramjet_control::dns::resolve_once(&dns, names)),
            Err(_) => ramjet_control::dns::DnsAnswers::default(),
        }
    };
    let class = args.ingress_class.as_deref();
    let mut report = Report::new(&ingresses, class, config.ssl_redirect).with_compile(&snapshot, config, resolve);
    if let Some(flags) = controller {
        report = report.with_controller(flags);
    }
    if let Some((review, _)) = settings {
        report = report.with_settings(review);
    }
    let text = match args.format {
        ReportFormat::Text => report.text(),
        ReportFormat::Json => report.json() + "\n",
        ReportFormat::Markdown => report.markdown(),
    };
    // A reader that stops early (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(!report.fails(args.fail_on.as_deref()))
}

/// The configuration source the flags choose; `None` when `--check` has done its job.
fn source(cli: &Cli) -> anyhow::Result<Option<Source>> {
    let mut ingress = IngressOptions {
        ingress_class: cli.ingress_class.clone(),
        controller_name: cli.controller_name.clone(),
        gateway_controller_name: cli.gateway_controller_name.clone(),
        default_ssl_certificate: cli.default_ssl_certificate.clone(),
        ..IngressOptions::default()
    };
    // A Gateway listener names the port clients use: the Service's (80, 443, the defaults) or ramjet's own.
    ingress.http_ports.push(cli.http_addr.port());
    ingress.https_ports.push(cli.https_addr.unwrap_or(DEFAULT_HTTPS_ADDR).port());
    if let Some(path) = &cli.static_routes {
        let routes = routes_file::load(path)?;
        for warning in &routes.warnings {
            tracing::warn!("{}: {warning}", path.display());
        }
        if cli.check {
            println!(
                "{}: ok ({} routes, {} backends, {} TLS entries{})",
                path.display(),
                routes.routes.len(),
                routes.backends.len(),
                routes.tls.len(),
                if routes.default_backend.is_some() { ", a default backend" } else { "" }
            );
            return Ok(None);
        }
        return Ok(Some(Source::Static(routes)));
    }
    if let Some(dir) = &cli.manifests {
        let snapshot = manifests::load(dir, Arc::new(ingress.clone()))?;
        if cli.check {
            let mut compiler = Compiler::new();
            let draft = cluster::compile(&snapshot, &mut compiler);
            let generation = compiler.finish(draft).context("nothing compiled")?;
            let selector = ingress::ClassSelector::new(&snapshot.ingress_classes, &ingress);
            let ours = snapshot.ingresses.iter().filter(|i| selector.selects(i)).count();
            for d in generation.diagnostics.iter() {
                println!("{}: {}: {}", d.severity.as_str(), d.object, d.message);
            }
            for note in &snapshot.not_read {
                println!("not read: {}: {}", note.object, note.message);
            }
            // What was not checked, and why: a check must not pass by checking nothing.
            for skipped in snapshot.ingresses.iter().filter(|i| !selector.selects(i)) {
                let m = &skipped.metadata;
                let class = skipped.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
                let legacy = m.annotations.as_ref().and_then(|a| a.get(ingress::LEGACY_CLASS_ANNOTATION));
                let why = match (class, legacy) {
                    (Some(c), _) => format!(
                        "its class {c} is not an IngressClass of this directory whose controller is {}",
                        ingress.controller_name
                    ),
                    (None, Some(l)) => format!("its class annotation says {l}, not {}", ingress.ingress_class),
                    (None, None) => "it names no class, and no IngressClass of ours is the default".to_string(),
                };
                println!(
                    "skipped: Ingress {}/{}: {why}",
                    m.namespace.as_deref().unwrap_or("default"),
                    m.name.as_deref().unwrap_or("")
                );
            }
            println!(
                "{}: {} ({} Ingresses of class {}, {} routes, {} hosts, {} TLS hosts, {} problems)",
                dir.display(),
                if generation.diagnostics.is_empty() { "ok" } else { "usable with problems" },
                ours,
                ingress.ingress_class,
                generation.table.route_count(),
                generation.table.host_count(),
                generation.table.tls_hosts().len(),
                generation.diagnostics.len(),
            );
            if !generation.diagnostics.is_empty() {
                anyhow::bail!("{} problems in {}", generation.diagnostics.len(), dir.display());
            }
            if ours == 0 && !snapshot.ingresses.is_empty() {
                anyhow::bail!(
                    "checked nothing: none of the {} Ingresses in {} is of class {} (an IngressClass with controller {}, \
                     or --ingress-class and --controller-name to say which is ours)",
                    snapshot.ingresses.len(),
                    dir.display(),
                    ingress.ingress_class,
                    ingress.controller_name
                );
            }
            return Ok(None);
        }
        return Ok(Some(Source::Manifests { dir: dir.clone(), options: ingress, interval: Duration::from_secs(1) }));
    }
    let status_addresses = StatusAddresses::from_flags(cli.publish_service.as_deref(), cli.publish_address.as_deref())?;
    let identity = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("ramjet-{}", std::process::id()));
    let lease_namespace = std::env::var("RAMJET_POD_NAMESPACE").ok().filter(|n| !n.is_empty());
    let lease = LeaseOptions::new(cli.election_id.clone(), lease_namespace, identity);
    let mut options = ClusterOptions::new(cli.kubeconfig.clone(), ingress, lease);
    options.watch_namespace = cli.watch_namespace.clone().filter(|n| !n.is_empty());
    options.gateway_api = cli.gateway_api;
    options.audit_events = match cli.audit_events {
        AuditEventsArg::All => AuditEventsFrom::All,
        AuditEventsArg::Leader => AuditEventsFrom::Leader,
        AuditEventsArg::Off => AuditEventsFrom::Off,
    };
    options.status_addresses = status_addresses;
    if let Some(path) = &cli.kubeconfig {
        std::fs::metadata(path).with_context(|| format!("--kubeconfig {}", path.display()))?;
    }
    if cli.check {
        println!("cluster mode: flags ok (the cluster itself is not contacted by --check)");
        return Ok(None);
    }
    Ok(Some(Source::Cluster(options)))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    ramjet::install_crypto();
    // Everything is validated before any port is bound.
    let audit_webhook = cli.audit_webhook.as_deref().map(Webhook::new).transpose()?;
    let admin_token = cli.admin_token_file.as_deref().map(read_token).transpose()?;
    let default_certificate = match (&cli.default_certificate, &cli.default_certificate_key) {
        (Some(cert), Some(key)) => {
            let chain = std::fs::read(cert).with_context(|| format!("--default-certificate {}", cert.display()))?;
            let key_pem = std::fs::read(key).with_context(|| format!("--default-certificate-key {}", key.display()))?;
            let parsed = parse_certificate(&chain, &key_pem, &cert.display().to_string())
                .with_context(|| format!("--default-certificate {} / {}", cert.display(), key.display()))?;
            Some(parsed.key.clone())
        }
        _ => None,
    };
    let access_log = cli.access_log();
    if let Some(Destination::File(path)) = access_log.as_ref().map(|a| &a.destination) {
        check_access_log(path, cli.check)?;
    }
    let config = cli.config.as_deref().map(ramjet::ConfigFile::read).transpose()?;
    if let Some(file) = &config {
        for note in &file.config.notes {
            tracing::warn!(file = %file.path.display(), "{note}");
        }
        if cli.check {
            println!("{}: ok", file.path.display());
        }
    }
    let Some(source) = source(&cli)? else {
        return Ok(());
    };

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Handlers first, so a signal during start-up is not fatal.
    let (mut term, mut int, mut hup) = runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::hangup())?,
        ))
    })?;

    let mut daemon = Daemon::start(DaemonConfig {
        source,
        http_addr: cli.http_addr,
        https_addr: cli.https_addr.unwrap_or(DEFAULT_HTTPS_ADDR),
        admin_addr: cli.admin_addr,
        metrics_addr: cli.metrics_addr,
        workers: cli.workers,
        history_size: cli.history_size as usize,
        admin_token,
        audit_webhook,
        settings: Settings {
            header_timeout: cli.header_timeout,
            keepalive_timeout: cli.keepalive_timeout,
            idle_release_after: cli.idle_release_after,
            client_body_timeout: cli.client_body_timeout,
            client_write_timeout: cli.client_write_timeout,
            upstream_timeout: cli.upstream_timeout,
            upstream_keepalive_connections: cli.upstream_keepalive_connections,
            drain_timeout: cli.drain_timeout,
            metrics_grace: cli.metrics_grace,
            metrics_status_codes: cli.metrics_status_codes,
            client_address: cli.client_address(),
            tcp_idle_timeout: cli.tcp_idle_timeout,
            udp_idle_timeout: cli.udp_idle_timeout,
            ..Settings::default()
        },
        access_log,
        traces: cli.traces(),
        io_driver: match cli.io_driver {
            IoDriverArg::IoUring => IoDriver::IoUring,
            IoDriverArg::Auto => IoDriver::Auto,
            IoDriverArg::Legacy => IoDriver::Legacy,
        },
        default_certificate,
        pin_workers: true,
        peers: cli.peers.clone(),
        config,
        dns: ramjet_control::dns::DnsSettings {
            servers: (!cli.dns_server.is_empty()).then(|| cli.dns_server.clone()),
            min_ttl: cli.dns_min_ttl,
            max_ttl: cli.dns_max_ttl.max(cli.dns_min_ttl),
        },
    })?;
    for (id, driver) in daemon.dataplane.drivers.iter().enumerate() {
        tracing::info!(worker = id, "driver {driver}");
    }
    release_startup_memory();
    if let (Some(asked), None) = (cli.https_addr, daemon.https_addr()) {
        tracing::warn!(
            "--https-addr {asked} is not bound: the static routes have no `tls:` entry and no \
             --default-certificate is given, so there is no certificate to serve"
        );
    }
    log_client_address(&cli);
    let https = daemon.https_addr().map_or_else(|| "off".to_string(), |a| a.to_string());
    tracing::info!(
        http = %daemon.http_addr(),
        https = %https,
        admin = %daemon.admin_addr(),
        workers = daemon.dataplane.drivers.len(),
        "serving"
    );
    let mut certificate_files =
        cli.default_certificate.clone().zip(cli.default_certificate_key.clone()).map(|(cert, key)| {
            let read = std::fs::read(&cert).ok().zip(std::fs::read(&key).ok());
            DefaultCertificateFiles { cert, key, read }
        });
    let delay = runtime.block_on(async {
        // How often the default certificate's files are looked at (cert-manager and the kubelet
        // replace a mounted Secret's files without telling anyone).
        let mut look = tokio::time::interval(Duration::from_secs(2));
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = look.tick(), if certificate_files.is_some() => {
                    if let Some(files) = &mut certificate_files {
                        files.reload_into(&daemon.default_certificate);
                    }
                }
                _ = term.recv() => break cli.shutdown_delay,
                // Interactive: no load balancer to wait for.
                _ = int.recv() => break Duration::ZERO,
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reopening the access log");
                    daemon.reopen_access_log();
                }
            }
        }
    });
    // Out of rotation first: /readyz fails (and the Lease is given up) while the listeners still
    // accept, so connections sent before the endpoint's removal has propagated are served.
    daemon.begin_shutdown();
    runtime.block_on(async {
        if !delay.is_zero() {
            tracing::info!(delay = ?delay, "shutting down: not ready; accepting for --shutdown-delay before draining");
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = term.recv() => tracing::info!("second SIGTERM: draining now"),
                _ = int.recv() => tracing::info!("SIGINT: draining now"),
            }
        }
        tracing::info!("draining");
    });
    daemon.shutdown();
    tracing::info!("drained; exiting");
    Ok(())
}

/// `--default-certificate` and its key as last read: re-read when either file changes, and served
/// from the next handshake once both parse and match. A renewal half written (the certificate
/// replaced, the key not yet) fails to match, keeps the previous one in service, and is tried
/// again when either file changes next.
struct DefaultCertificateFiles {
    cert: PathBuf,
    key: PathBuf,
    read: Option<(Vec<u8>, Vec<u8>)>,
}

impl DefaultCertificateFiles {
    fn reload_into(&mut self, default: &ramjet_dataplane::DefaultCertificate) {
        let (Ok(chain), Ok(key)) = (std::fs::read(&self.cert), std::fs::read(&self.key)) else { return };
        if self.read.as_ref().is_some_and(|(c, k)| *c == chain && *k == key) {
            return;
        }
        let source = self.cert.display().to_string();
        match parse_certificate(&chain, &key, &source) {
            Ok(parsed) => {
                default.store(parsed.key.clone());
                tracing::info!(certificate = %source, "default certificate reloaded");
                self.read = Some((chain, key));
            }
            // The files are looked at again in two seconds; said once per content.
            Err(e) => {
                tracing::warn!(certificate = %source, error = %e, "default certificate changed but cannot be used; serving the previous one");
                self.read = Some((chain, key));
            }
        }
    }
}

/// Says once at start how the client's address is learnt, and warns when every peer is trusted.
fn log_client_address(cli: &Cli) {
    let address = cli.client_address();
    for (listener, on) in [("http", address.proxy_protocol_http), ("https", address.proxy_protocol_https)] {
        if on {
            tracing::info!(listener, "the {listener} listener expects a PROXY protocol header on every connection");
        }
    }
    if !cli.trusted_proxies.is_empty() {
        let trusted: Vec<String> = cli.trusted_proxies.iter().map(|b| b.to_string()).collect();
        tracing::info!(
            field = address.rules.field.name(),
            trusted = trusted.join(","),
            "the client's address is read from requests of trusted proxies"
        );
        if trusted.iter().any(|b| b == "0.0.0.0/0" || b == "::/0") {
            tracing::warn!(
                "--trusted-proxies includes {}: every client can name its own address with {}",
                if trusted.iter().any(|b| b == "0.0.0.0/0") { "0.0.0.0/0" } else { "::/0" },
                address.rules.field.name()
            );
        }
    }
}

/// An access-log file must be writable before any port is bound: opened for appending (and so
/// created), or with `--check`, which changes nothing, its directory must exist.
fn check_access_log(path: &Path, check: bool) -> anyhow::Result<()> {
    if check && !path.exists() {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        anyhow::ensure!(
            dir.is_dir(),
            "--access-log {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
        return Ok(());
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .with_context(|| format!("--access-log {}: cannot open for appending", path.display()))
}

/// Start-up parses the whole configuration (YAML for a large cluster is tens of megabytes of
/// short-lived allocations); glibc keeps freed memory in its arenas. Hand it back once the first
/// generation is serving, so resident memory reflects what the daemon holds.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_startup_memory() {
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps; it touches no
    // allocation in use and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_startup_memory() {}
