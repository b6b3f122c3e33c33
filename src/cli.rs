//! Command-line flags; every flag can also be set as `RAMJET_<FLAG>` (the Helm chart does).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::{AccessLogSettings, AddressField, AddressRules, ClientAddress, OtlpEndpoint, TraceSettings};
use ramjet_shared::IpBlock;

/// `--https-addr` when it is not given.
pub const DEFAULT_HTTPS_ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 8443);

/// The version, the commit and the commit's date (`build.rs`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (", env!("RAMJET_COMMIT"), " ", env!("RAMJET_COMMIT_DATE"), ")");

#[derive(Parser, Debug)]
#[command(
    name = "ramjet",
    version = VERSION,
    about = "Kubernetes ingress controller and edge proxy: a configuration change is one pointer store"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Serve the routes in this YAML file instead of watching a cluster.
    #[arg(help_heading = "Configuration", long, env = "RAMJET_STATIC_ROUTES", value_name = "FILE")]
    pub static_routes: Option<PathBuf>,

    /// Serve the Kubernetes objects (Ingress, IngressClass, Service, EndpointSlice, Secret) in the
    /// YAML files of this directory instead of watching a cluster; re-read when they change.
    #[arg(
        help_heading = "Configuration",
        long,
        env = "RAMJET_MANIFESTS",
        value_name = "DIR",
        conflicts_with = "static_routes"
    )]
    pub manifests: Option<PathBuf>,

    /// The controller configuration: global defaults (HSTS, ssl-redirect, body size, proxy
    /// timeouts) with ingress-nginx's ConfigMap keys; the file may be that ConfigMap. Re-read when
    /// it changes (docs/configuration.md).
    #[arg(help_heading = "Configuration", long, env = "RAMJET_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Resolve names outside the cluster (ExternalName Services, auth-url hosts) with these DNS
    /// servers (IP or IP:PORT, comma-separated) instead of the system's (/etc/resolv.conf).
    #[arg(help_heading = "Configuration", long, env = "RAMJET_DNS_SERVER", value_delimiter = ',', value_name = "ADDR", value_parser = parse_dns_server)]
    pub dns_server: Vec<SocketAddr>,

    /// A DNS answer is kept at least this long (and a failed name asked again after it).
    #[arg(help_heading = "Configuration", long, env = "RAMJET_DNS_MIN_TTL", default_value = "5s", value_parser = duration)]
    pub dns_min_ttl: Duration,

    /// A DNS answer is kept at most this long.
    #[arg(help_heading = "Configuration", long, env = "RAMJET_DNS_MAX_TTL", default_value = "5m", value_parser = duration)]
    pub dns_max_ttl: Duration,

    /// Validate the configuration and exit (0 when it is usable), binding no port.
    #[arg(help_heading = "Configuration", long)]
    pub check: bool,

    /// Where plain HTTP is served.
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,

    /// Where HTTPS is served [default: 0.0.0.0:8443]. Bound in cluster and --manifests mode, where
    /// certificates may arrive at any time; with --static-routes only when the file has a `tls:`
    /// entry or --default-certificate is given — otherwise there is nothing to serve on it.
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_HTTPS_ADDR")]
    pub https_addr: Option<SocketAddr>,

    /// The admin listener: /admin/generations, /admin/rollback, /admin/traffic, /admin/route, and
    /// /metrics, /healthz, /readyz.
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_ADMIN_ADDR", default_value = "0.0.0.0:10254")]
    pub admin_addr: SocketAddr,

    /// A read-only listener serving only /metrics, /healthz and /readyz, for Prometheus and the
    /// kubelet, so that the admin API can be bound where only operators reach it.
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Data-plane workers (0: one per CPU this process may run on).
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// Applied generations kept for rollback.
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_HISTORY_SIZE", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub history_size: u64,

    /// File holding the bearer token that POST and DELETE /admin/rollback require.
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_ADMIN_TOKEN_FILE", value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,

    /// The replicas' admin listeners (`HOST:PORT`, comma-separated; a headless Service's name
    /// resolves to every replica): the Lease holder judges auto-promoting canaries on all of their
    /// traffic, not only its own share (the chart sets its fleet Service).
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_PEERS", value_name = "HOST:PORT", value_delimiter = ',', value_parser = peer)]
    pub peers: Vec<String>,

    /// POST each audit record as JSON to this http:// URL (https is refused).
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_AUDIT_WEBHOOK", value_name = "URL")]
    pub audit_webhook: Option<String>,

    /// Connect, send, and each wait for the upstream must finish within this (504 otherwise).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_UPSTREAM_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub upstream_timeout: Duration,

    /// A TCP route's relay, or a TLS passthrough, with no byte either way for this long is closed.
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_TCP_IDLE_TIMEOUT", default_value = "10m", value_parser = duration)]
    pub tcp_idle_timeout: Duration,

    /// A UDP route's flow (one client's datagrams and their answers) with no datagram either way
    /// for this long ends, and its socket to the backend closes.
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_UDP_IDLE_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub udp_idle_timeout: Duration,

    /// Idle connections each worker keeps open to each backend endpoint for reuse (HTTP/1.1; closed
    /// after 30 s unused). Enough to cover the requests in flight at a burst's peak, or every burst
    /// pays a connect and a close per request beyond it.
    #[arg(
        help_heading = "Timeouts, upstreams and shutdown",
        long,
        env = "RAMJET_UPSTREAM_KEEPALIVE_CONNECTIONS",
        default_value_t = 1024
    )]
    pub upstream_keepalive_connections: usize,

    /// Clients must send a complete request head within this (408 otherwise).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_HEADER_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub header_timeout: Duration,

    /// Each read of a request body must bring bytes within this (408 otherwise).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_CLIENT_BODY_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub client_body_timeout: Duration,

    /// Each write to a client must finish within this, or the connection is closed (a client that
    /// stops reading holds nothing for longer).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_CLIENT_WRITE_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub client_write_timeout: Duration,

    /// Idle keep-alive client connections are closed after this (a plain-HTTP one that gave its
    /// buffers back up to 50 ms later: it waits on a coarse per-worker timer).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_KEEPALIVE_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub keepalive_timeout: Duration,

    /// An HTTP/1.1 client connection (plain or TLS) quiet for this long gives its buffers back to its
    /// worker until it speaks again (memory of idle connections; a client that speaks sooner pays
    /// nothing).
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_IDLE_RELEASE_AFTER", default_value = "1s", value_parser = duration)]
    pub idle_release_after: Duration,

    /// On SIGTERM, `/readyz` fails at once and the listeners keep accepting this long, while the
    /// endpoint's removal reaches load balancers and kube-proxy; then they close and in-flight
    /// requests get `--drain-timeout` to finish. A second SIGTERM, or SIGINT, cuts it short.
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_SHUTDOWN_DELAY", default_value = "5s", value_parser = duration)]
    pub shutdown_delay: Duration,

    /// After the listeners close, in-flight requests get this long to finish.
    #[arg(help_heading = "Timeouts, upstreams and shutdown", long, env = "RAMJET_DRAIN_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub drain_timeout: Duration,

    /// Listeners that expect a PROXY protocol header (v1 or v2) before each connection's first
    /// byte: `http`, `https`, or both (comma-separated). A connection without a valid header is
    /// closed. Only for a listener that nothing but the load balancer can reach
    /// (docs/client-address.md).
    #[arg(
        help_heading = "Client address",
        long,
        env = "RAMJET_PROXY_PROTOCOL",
        value_enum,
        value_delimiter = ',',
        value_name = "http,https"
    )]
    pub proxy_protocol: Vec<ListenerArg>,

    /// A PROXY protocol header must be whole within this.
    #[arg(help_heading = "Client address", long, env = "RAMJET_PROXY_PROTOCOL_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub proxy_protocol_timeout: Duration,

    /// Peers (addresses and CIDR blocks, comma-separated) whose --forwarded-for-header is believed:
    /// walked from its right past every trusted address, the first untrusted one is the client.
    /// The peer is the connection's, or the address a PROXY protocol header named. Without this
    /// flag, nobody's.
    #[arg(help_heading = "Client address", long, env = "RAMJET_TRUSTED_PROXIES", value_delimiter = ',', value_name = "CIDR,...", value_parser = ip_block)]
    pub trusted_proxies: Vec<IpBlock>,

    /// Believe only the client's address from --trusted-proxies, not their X-Forwarded-Host,
    /// -Proto and -Port (ingress-nginx's enable-real-ip without use-forwarded-headers).
    #[arg(help_heading = "Client address", long, env = "RAMJET_TRUSTED_PROXIES_ADDRESS_ONLY")]
    pub trusted_proxies_address_only: bool,

    /// The request field that names the client in requests from --trusted-proxies:
    /// X-Forwarded-For, X-Real-IP, Forwarded (RFC 7239's for=), or another field holding a list of
    /// addresses.
    #[arg(help_heading = "Client address", long, env = "RAMJET_FORWARDED_FOR_HEADER", default_value = "X-Forwarded-For", value_parser = address_field)]
    pub forwarded_for_header: AddressField,

    /// X-Forwarded-For upstream is the client's own X-Forwarded-For with the peer appended, rather
    /// than the client's address alone.
    #[arg(help_heading = "Client address", long, env = "RAMJET_COMPUTE_FULL_FORWARDED_FOR")]
    pub compute_full_forwarded_for: bool,

    /// Certificate (PEM chain) for handshakes without SNI or for hosts without a certificate
    /// (without it, a self-signed one). Re-read when the file or its key changes.
    #[arg(
        help_heading = "TLS",
        long,
        env = "RAMJET_DEFAULT_CERTIFICATE",
        value_name = "PATH",
        requires = "default_certificate_key"
    )]
    pub default_certificate: Option<PathBuf>,

    /// Private key (PEM) of --default-certificate.
    #[arg(
        help_heading = "TLS",
        long,
        env = "RAMJET_DEFAULT_CERTIFICATE_KEY",
        value_name = "PATH",
        requires = "default_certificate"
    )]
    pub default_certificate_key: Option<PathBuf>,

    /// io_uring (refuse to start without it), auto (fall back to epoll with a warning), or legacy.
    #[arg(help_heading = "Listeners and workers", long, env = "RAMJET_IO_DRIVER", value_enum, default_value_t = IoDriverArg::IoUring)]
    pub io_driver: IoDriverArg,

    /// Log format.
    #[arg(help_heading = "Logs", long, env = "RAMJET_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// The access log: one record per request, to `stdout`, `stderr`, a file PATH (reopened on
    /// SIGHUP), or `off`.
    #[arg(
        help_heading = "Logs",
        long,
        env = "RAMJET_ACCESS_LOG",
        value_name = "stdout|stderr|PATH|off",
        default_value = "off"
    )]
    pub access_log: String,

    /// How access-log records are written: JSON lines, text, or nginx's `combined` and
    /// ingress-nginx's `log-format-upstream` for tools that read those.
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_FORMAT", value_enum, default_value_t = AccessLogFormat::Json)]
    pub access_log_format: AccessLogFormat,

    /// A line of your own, of text and nginx variables, in place of --access-log-format: an
    /// ingress-nginx ConfigMap's `log-format-upstream` as it is (docs/access-log.md).
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_TEMPLATE", value_name = "LINE")]
    pub access_log_template: Option<String>,

    /// How a template's values are escaped: nginx's `default` (`\xHH`), `json` or `none`
    /// (ingress-nginx's `log-format-escape-json` and `-none`).
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_ESCAPE", value_enum, default_value_t = AccessLogEscape::Default)]
    pub access_log_escape: AccessLogEscape,

    /// Requests for these paths (exact match, the query ignored; comma-separated) are not logged,
    /// e.g. health checks.
    #[arg(
        help_heading = "Logs",
        long,
        env = "RAMJET_ACCESS_LOG_SKIP_PATHS",
        value_delimiter = ',',
        value_name = "PATH,..."
    )]
    pub access_log_skip_paths: Vec<String>,

    /// Log only requests answered with a status of 400 or more.
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_ERRORS_ONLY")]
    pub access_log_errors_only: bool,

    /// The share of successful requests (status below 400) logged, 0 to 1; errors are always logged.
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_SAMPLE", default_value_t = 1.0, value_parser = share)]
    pub access_log_sample: f64,

    /// Each worker's access-log buffer, in KiB: records that do not fit while the writer is behind
    /// are dropped and counted (ramjet_access_log_dropped_total).
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_BUFFER_KIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(4..=1048576))]
    pub access_log_buffer_kib: u64,

    /// How often the writer thread writes what the workers logged.
    #[arg(help_heading = "Logs", long, env = "RAMJET_ACCESS_LOG_FLUSH_INTERVAL", default_value = "20ms", value_parser = duration)]
    pub access_log_flush_interval: Duration,

    /// Send a span per sampled request to this OpenTelemetry collector over OTLP/HTTP (JSON):
    /// `http://HOST:PORT` (`/v1/traces` is added) or the full traces URL. Off when not given.
    #[arg(help_heading = "Traces", long, env = "RAMJET_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<OtlpEndpoint>,

    /// The share of requests without a sampled parent that are traced, 0 to 1.
    #[arg(help_heading = "Traces", long, env = "RAMJET_TRACE_SAMPLE_RATIO", default_value = "1", value_parser = share)]
    pub trace_sample_ratio: f64,

    /// Follow the sampled flag of a request's `traceparent` (OpenTelemetry's parent-based
    /// sampling); `false`: the ratio decides every request.
    #[arg(help_heading = "Traces", long, env = "RAMJET_TRACE_PARENT_BASED", default_value_t = true, action = clap::ArgAction::Set)]
    pub trace_parent_based: bool,

    /// `service.name` of the spans.
    #[arg(help_heading = "Traces", long, env = "RAMJET_TRACE_SERVICE_NAME", default_value = "ramjet")]
    pub trace_service_name: String,

    /// The spans' name, of text and nginx variables ($request_method, $uri, $request_uri, $host,
    /// $scheme), as ingress-nginx's opentelemetry-operation-name; default: the request's method.
    #[arg(help_heading = "Traces", long, env = "RAMJET_TRACE_OPERATION_NAME", value_parser = operation_name)]
    pub trace_operation_name: Option<ramjet_dataplane::OperationName>,

    /// Finished spans each worker holds for the exporter; more are dropped and counted.
    #[arg(help_heading = "Traces", long, env = "RAMJET_TRACE_QUEUE", default_value_t = 2048, value_parser = clap::value_parser!(u64).range(16..=1_000_000))]
    pub trace_queue: u64,

    /// The series of a route and backend that left the configuration are dropped from /metrics
    /// after this long without requests.
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_METRICS_GRACE", default_value = "5m", value_parser = duration)]
    pub metrics_grace: Duration,

    /// Count each route's requests by status code (`ramjet_route_responses_total{status}`), not
    /// only by class: 4 KiB per (route, backend) series and worker.
    #[arg(help_heading = "Admin API and history", long, env = "RAMJET_METRICS_STATUS_CODES")]
    pub metrics_status_codes: bool,

    /// Kubernetes mode: the IngressClass name this controller serves.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_INGRESS_CLASS", default_value = "ramjet")]
    pub ingress_class: String,

    /// Kubernetes mode: the IngressClass `spec.controller` value that is ours.
    #[arg(
        help_heading = "Kubernetes",
        long,
        env = "RAMJET_CONTROLLER_NAME",
        default_value = "ramjet.dev/ingress-controller"
    )]
    pub controller_name: String,

    /// Kubernetes mode: watch the Gateway API kinds (GatewayClass, Gateway, HTTPRoute,
    /// ReferenceGrant) when the cluster serves them, and write their status.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_GATEWAY_API", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_api: bool,

    /// The GatewayClass `spec.controllerName` value that is ours (Gateway API).
    #[arg(
        help_heading = "Kubernetes",
        long,
        env = "RAMJET_GATEWAY_CONTROLLER_NAME",
        default_value = "ramjet.dev/gateway-controller"
    )]
    pub gateway_controller_name: String,

    /// Kubernetes and --manifests mode: the `kubernetes.io/tls` Secret served to TLS clients whose
    /// name has no certificate (as ingress-nginx's flag of the same name), compiled like an
    /// Ingress's, so a renewed Secret is served with the next generation. Before --default-certificate.
    #[arg(help_heading = "TLS", long, env = "RAMJET_DEFAULT_SSL_CERTIFICATE", value_name = "NAMESPACE/NAME", value_parser = secret_name)]
    pub default_ssl_certificate: Option<(String, String)>,

    /// Kubernetes mode: watch only this namespace.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,

    /// Kubernetes mode: kubeconfig to use instead of the in-cluster configuration.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubernetes mode: write this Service's load-balancer addresses into Ingress status.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_PUBLISH_SERVICE", value_name = "NS/NAME")]
    pub publish_service: Option<String>,

    /// Kubernetes mode: write this address into Ingress status.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_PUBLISH_ADDRESS")]
    pub publish_address: Option<String>,

    /// Kubernetes mode: the Lease that elects the replica writing Ingress status.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_ELECTION_ID", default_value = "ramjet-leader")]
    pub election_id: String,

    /// Which replicas write an Event for each generation they publish: `all` (each pod's own
    /// record), `leader` (the Lease holder's; pins and resumes by the replica they were made on),
    /// or `off` (the record stays in /admin/generations, the log and --audit-webhook). A large
    /// DaemonSet writes one Event per pod per change with `all`.
    #[arg(help_heading = "Kubernetes", long, env = "RAMJET_AUDIT_EVENTS", value_enum, default_value = "all")]
    pub audit_events: AuditEventsArg,
}

/// Subcommands; without one, `ramjet` runs the daemon.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Before switching from ingress-nginx: what ramjet does with each annotation of each Ingress
    /// (honoured, approximated, refused, ignored, refused-to-serve, unknown), and each Ingress
    /// compiled with its Services and Secrets: served, partly or not served. Exits 0 when every
    /// Ingress would behave as it does under ingress-nginx (or nothing --fail-on names is found),
    /// 1 otherwise, 2 when the report could not be made.
    MigrationReport(Box<MigrationReportArgs>),
    /// Prints the shell completion script for SHELL (bash, zsh, fish, elvish, powershell), e.g.
    /// `ramjet completions bash > /etc/bash_completion.d/ramjet`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args, Debug)]
pub struct MigrationReportArgs {
    /// Read the Ingresses from this cluster (default: in-cluster, else the usual kubeconfig).
    #[arg(long, value_name = "PATH", conflicts_with = "manifests")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME", conflicts_with = "manifests")]
    pub context: Option<String>,

    /// Read the Ingresses from the YAML files of this directory instead of a cluster.
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,

    /// Only this namespace (cluster only; default: all namespaces).
    #[arg(long, short = 'n', conflicts_with = "manifests")]
    pub namespace: Option<String>,

    /// Only Ingresses of this class (`spec.ingressClassName` or the legacy annotation).
    #[arg(long, value_name = "CLASS")]
    pub ingress_class: Option<String>,

    /// Also judge ingress-nginx's controller ConfigMap (the `--configmap` ingress-nginx ran with,
    /// usually ingress-nginx/ingress-nginx-controller), from the cluster or the --manifests
    /// directory: what ramjet does with its settings, and the flags that keep them. The Ingresses
    /// are then compiled with it, as `--config` would give it to ramjet.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name)]
    pub nginx_configmap: Option<(String, String)>,

    /// Also judge ingress-nginx's controller flags: the args of its Deployment (else DaemonSet)
    /// NAMESPACE/NAME, usually ingress-nginx/ingress-nginx-controller, from the cluster or the
    /// --manifests directory, and the ramjet flags that keep them. The ConfigMap its --configmap
    /// names is judged too, unless --nginx-configmap names another.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name)]
    pub nginx_controller: Option<(String, String)>,

    /// Output format: text, json (its schema: docs/migration-report.md) or markdown (for a
    /// pull-request comment).
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,

    /// Exit 1 only when the report finds one of these (comma-separated): verdicts (approximated,
    /// refused, ignored, refused-to-serve, unknown) or outcomes (partly, not-served). Default:
    /// anything that would not behave as under ingress-nginx.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fail_on: Option<Vec<ramjet_control::migration::FailOn>>,

    /// Look names outside the cluster (auth-url hosts, ExternalName Services, mirror targets) up
    /// with these DNS servers (IP or IP:PORT, comma-separated) instead of the system's, as the
    /// daemon's --dns-server.
    #[arg(long, env = "RAMJET_DNS_SERVER", value_delimiter = ',', value_name = "ADDR", value_parser = parse_dns_server)]
    pub dns_server: Vec<SocketAddr>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Text,
    Json,
    Markdown,
}

/// A listener of the daemon, for --proxy-protocol.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerArg {
    Http,
    Https,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoDriverArg {
    IoUring,
    Auto,
    Legacy,
}

impl Cli {
    /// How the client's address is learnt, as the flags say.
    pub fn client_address(&self) -> ClientAddress {
        ClientAddress {
            proxy_protocol_http: self.proxy_protocol.contains(&ListenerArg::Http),
            proxy_protocol_https: self.proxy_protocol.contains(&ListenerArg::Https),
            proxy_protocol_timeout: self.proxy_protocol_timeout,
            rules: AddressRules {
                trusted: self.trusted_proxies.clone().into(),
                field: self.forwarded_for_header.clone(),
                full_forwarded_for: self.compute_full_forwarded_for,
                address_only: self.trusted_proxies_address_only,
            },
        }
    }

    /// The access-log settings the flags ask for (`None`: off).
    /// The trace settings, when an endpoint is given. The resource names this replica: its pod
    /// (`POD_NAME`, `RAMJET_POD_NAMESPACE`, as the chart sets them) or its host.
    pub fn traces(&self) -> Option<TraceSettings> {
        let mut settings = TraceSettings::new(self.otlp_endpoint.clone()?);
        settings.service_name = self.trace_service_name.clone();
        settings.operation_name = self.trace_operation_name.clone();
        settings.sample_ratio = self.trace_sample_ratio;
        settings.parent_based = self.trace_parent_based;
        settings.queue_spans = self.trace_queue as usize;
        settings.resource.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
        let pod = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).ok().filter(|p| !p.is_empty());
        if let Some(pod) = pod {
            settings.resource.push(("service.instance.id".into(), pod.clone()));
            if std::env::var("POD_NAME").is_ok() {
                settings.resource.push(("k8s.pod.name".into(), pod));
            }
        }
        if let Ok(namespace) = std::env::var("RAMJET_POD_NAMESPACE") {
            settings.resource.push(("k8s.namespace.name".into(), namespace));
        }
        Some(settings)
    }

    pub fn access_log(&self) -> Option<AccessLogSettings> {
        let destination = match self.access_log.as_str() {
            "off" | "" => return None,
            "stdout" | "-" => Destination::Stdout,
            "stderr" => Destination::Stderr,
            path => Destination::File(PathBuf::from(path)),
        };
        let format = match self.access_log_format {
            AccessLogFormat::Json => Format::Json,
            AccessLogFormat::Text => Format::Text,
            AccessLogFormat::Combined => Format::Combined,
            AccessLogFormat::NginxUpstream => Format::NginxUpstream,
        };
        let mut settings = AccessLogSettings::new(destination, format);
        if let Some(line) = self.access_log_template.as_deref().filter(|l| !l.is_empty()) {
            let escape = match self.access_log_escape {
                AccessLogEscape::Default => ramjet_dataplane::LogEscape::Default,
                AccessLogEscape::Json => ramjet_dataplane::LogEscape::Json,
                AccessLogEscape::None => ramjet_dataplane::LogEscape::None,
            };
            let (template, missing) = ramjet_dataplane::LogTemplate::parse(line, escape);
            if !missing.is_empty() {
                tracing::warn!(
                    "--access-log-template: ramjet has no {}; written as nginx writes an empty variable",
                    missing.iter().map(|m| format!("${m}")).collect::<Vec<_>>().join(", ")
                );
            }
            settings.template = Some(std::sync::Arc::new(template));
        }
        settings.skip_paths = self.access_log_skip_paths.iter().filter(|p| !p.is_empty()).cloned().collect();
        settings.errors_only = self.access_log_errors_only;
        settings.success_sample = self.access_log_sample;
        settings.buffer_bytes = self.access_log_buffer_kib as usize * 1024;
        settings.flush_interval = self.access_log_flush_interval;
        Some(settings)
    }
}

/// How a line template's values are escaped.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLogEscape {
    /// nginx's: `"`, `\`, control and non-ASCII bytes as `\xHH`; an empty value is `-`.
    Default,
    /// JSON string escaping, for a template that is a JSON object.
    Json,
    /// Values as they are.
    None,
}

/// How access-log records are written.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// One JSON object per line, every field named.
    Json,
    /// `key=value` fields after the request line.
    Text,
    /// nginx's `combined`, as log tools read it.
    Combined,
    /// ingress-nginx's default `log-format-upstream`.
    NginxUpstream,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a share between 0 and 1 (0.1 logs one success in ten)")),
    }
}

/// A peer's admin listener: `HOST:PORT`, the host a DNS name or an address (IPv6 in brackets).
fn peer(s: &str) -> Result<String, String> {
    let s = s.trim();
    let valid = s.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok_and(|p| p > 0)
    });
    if valid {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not HOST:PORT (a replica's admin listener, e.g. ramjet-fleet.ingress.svc:10254)"))
    }
}

fn namespaced_name(s: &str) -> Result<(String, String), String> {
    match s.trim().split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("`{s}` is not NAMESPACE/NAME (e.g. ingress-nginx/ingress-nginx-controller)")),
    }
}

fn ip_block(s: &str) -> Result<IpBlock, String> {
    IpBlock::parse(s)
}

fn address_field(s: &str) -> Result<AddressField, String> {
    AddressField::new(s.trim())
}

/// A span name template (`--trace-operation-name`).
fn operation_name(s: &str) -> Result<ramjet_dataplane::OperationName, String> {
    ramjet_dataplane::OperationName::parse(s)
}

/// A DNS server: `IP` (port 53) or `IP:PORT`.
fn parse_dns_server(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    s.parse::<SocketAddr>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
        .map_err(|_| format!("`{s}` is not an IP address or IP:PORT"))
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("`{s}` is not a duration like 500ms, 10s or 2m: {e}"))
}

/// `NAMESPACE/NAME` of a Secret.
fn secret_name(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((namespace.to_string(), name.to_string()))
        }
        _ => Err(format!("expected NAMESPACE/NAME, got {text:?}")),
    }
}

/// `--audit-events`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum AuditEventsArg {
    All,
    Leader,
    Off,
}
