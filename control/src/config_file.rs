//! The controller configuration file (`--config FILE`): the defaults that apply to every host and
//! route, written with ingress-nginx's ConfigMap keys and values so that an installation's
//! ConfigMap works as it is — the file may be the ConfigMap itself (`kind: ConfigMap`, its `data`
//! is read), just its `data` as a mapping, or a directory where the ConfigMap is mounted (a file
//! per key, as Kubernetes mounts one).
//!
//! A file is read as ingress-nginx reads its ConfigMap: a key it does not set has ingress-nginx's
//! default (HSTS on, `ssl-redirect: "true"`, `proxy-body-size: 1m`, 5 s to connect and 60 s to
//! send and read). Without `--config`, ramjet's own defaults apply ([`ControllerConfig::builtin`]):
//! HSTS on too, but no redirect, no body limit and `--upstream-timeout`.
//!
//! The file is re-read when it changes ([`watch`]) and compiled with the routes: a change is a new
//! generation like any other, audited and pinnable. A file that cannot be read refuses to start
//! the daemon, naming the file, the line and the key; once running, a bad edit keeps the last good
//! configuration and says why in the log.
//!
//! Keys that are process settings (listeners, the client's address, traces, the access log) are
//! flags; the file names the flag for each one ramjet knows ([`crate::migration::configmap`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ramjet_shared::error_pages::parse_codes;
use ramjet_shared::ACME_CHALLENGE;

use crate::compile::annotations::values::{parse_seconds, parse_size};
use crate::compile::annotations::Verdict;
use crate::migration::configmap;

/// `Strict-Transport-Security` on HTTPS answers for hosts with a certificate of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hsts {
    pub max_age: u64,
    pub include_subdomains: bool,
    pub preload: bool,
}

impl Hsts {
    /// ingress-nginx's: a year, subdomains included, no preload.
    pub const DEFAULT: Hsts = Hsts { max_age: 31_536_000, include_subdomains: true, preload: false };

    /// The field's value: `max-age=31536000; includeSubDomains`.
    pub fn value(&self) -> String {
        let mut value = format!("max-age={}", self.max_age);
        if self.include_subdomains {
            value.push_str("; includeSubDomains");
        }
        if self.preload {
            value.push_str("; preload");
        }
        value
    }
}

/// What an Ingress route gets when its own annotations say nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteDefaults {
    /// `proxy-body-size` (`None`: no limit).
    pub max_body: Option<u64>,
    /// `proxy-connect-timeout`, `proxy-send-timeout`, `proxy-read-timeout` (`None`: the daemon's
    /// `--upstream-timeout`).
    pub connect_timeout: Option<Duration>,
    pub send_timeout: Option<Duration>,
    pub read_timeout: Option<Duration>,
}

/// The controller's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `hsts`, `hsts-max-age`, `hsts-include-subdomains`, `hsts-preload` (`None`: off).
    pub hsts: Option<Hsts>,
    /// `ssl-redirect`: plain HTTP for a TLS host is redirected to HTTPS unless its Ingress says
    /// `ssl-redirect: "false"`.
    pub ssl_redirect: bool,
    /// `force-ssl-redirect`: every Ingress host is redirected, TLS or not, unless its Ingress says otherwise.
    pub force_ssl_redirect: bool,
    pub route_defaults: RouteDefaults,
    /// `global-allowed-response-headers`: the header names an Ingress's `custom-headers` may set.
    pub allowed_response_headers: Vec<String>,
    /// `default-backend-service` (`namespace/name`, ingress-nginx's controller flag of that name):
    /// the Service that answers requests no Ingress matches, and for Ingress backends without
    /// endpoints or with a status in `custom-http-errors`, unless their Ingress names its own.
    pub default_backend: Option<(String, String)>,
    /// `custom-http-errors`: the backend answers with these statuses that the default backend
    /// replaces, for Ingresses that do not set the annotation.
    pub custom_http_errors: Vec<u16>,
    /// `no-tls-redirect-locations`: paths (prefixes) that plain HTTP is never redirected from,
    /// besides the ACME challenge's, which never is.
    pub no_tls_redirect_locations: Vec<String>,
    /// `service-upstream`: Ingress backends are their Services' cluster IPs, not their endpoints,
    /// unless an Ingress says `service-upstream: "false"`.
    pub service_upstream: bool,
    /// `enable-access-log-for-default-backend`: requests no Ingress matches are logged.
    pub log_unmatched: bool,
    /// Keys that the file sets but that take effect elsewhere or not at all, with why (for the log
    /// and `--check`).
    pub notes: Vec<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ControllerConfig {
    /// Ramjet's defaults, without a file: HSTS on, as ingress-nginx; the rest as each Ingress says.
    pub fn builtin() -> Self {
        ControllerConfig {
            hsts: Some(Hsts::DEFAULT),
            ssl_redirect: false,
            force_ssl_redirect: false,
            route_defaults: RouteDefaults::default(),
            allowed_response_headers: Vec::new(),
            default_backend: None,
            custom_http_errors: Vec::new(),
            no_tls_redirect_locations: Vec::new(),
            service_upstream: false,
            log_unmatched: true,
            notes: Vec::new(),
        }
    }

    /// ingress-nginx's defaults, which a file starts from.
    fn nginx_defaults() -> Self {
        ControllerConfig {
            hsts: Some(Hsts::DEFAULT),
            ssl_redirect: true,
            force_ssl_redirect: false,
            route_defaults: RouteDefaults {
                max_body: Some(1024 * 1024),
                connect_timeout: Some(Duration::from_secs(5)),
                send_timeout: Some(Duration::from_secs(60)),
                read_timeout: Some(Duration::from_secs(60)),
            },
            allowed_response_headers: Vec::new(),
            default_backend: None,
            custom_http_errors: Vec::new(),
            no_tls_redirect_locations: Vec::new(),
            service_upstream: false,
            log_unmatched: false,
            notes: Vec::new(),
        }
    }

    /// Reads the file or mounted ConfigMap at `path`, and the text it was read from (for
    /// [`watch`] to see a change).
    pub fn read(path: &Path) -> Result<(Self, String), ConfigError> {
        let failed =
            |e: std::io::Error| ConfigError { path: path.to_path_buf(), line: None, key: None, message: e.to_string() };
        if path.is_dir() {
            let data = mounted(path).map_err(failed)?;
            let text = serde_yaml_ng::to_string(&data).unwrap_or_default();
            return Ok((Self::parse(&text, path)?, text));
        }
        let text = std::fs::read_to_string(path).map_err(failed)?;
        Ok((Self::parse(&text, path)?, text))
    }

    /// Parses a file's text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let data = data_of(text).map_err(|(message, line)| ConfigError {
            path: path.to_path_buf(),
            line,
            key: None,
            message,
        })?;
        Self::from_data(&data, path, text)
    }

    /// The configuration a ConfigMap's `data` gives (`source` names it in errors; `text`, when the
    /// data was read from one, finds the line of a key).
    pub fn from_data(data: &BTreeMap<String, String>, source: &Path, text: &str) -> Result<Self, ConfigError> {
        let error = |key: Option<&str>, message: String| ConfigError {
            path: source.to_path_buf(),
            line: key.and_then(|k| line_of(text, k)),
            key: key.map(str::to_string),
            message,
        };
        let mut config = Self::nginx_defaults();
        let get = |key: &str| data.get(key).map(|v| v.trim());
        let boolean = |key: &str, default: bool| match get(key) {
            None => Ok(default),
            Some(v) => go_bool(v).ok_or_else(|| error(Some(key), format!("`{v}` is not true or false"))),
        };
        if boolean("hsts", true)? {
            let max_age = match get("hsts-max-age") {
                None => Hsts::DEFAULT.max_age,
                Some(v) => {
                    v.parse().map_err(|_| error(Some("hsts-max-age"), format!("`{v}` is not a number of seconds")))?
                }
            };
            config.hsts = Some(Hsts {
                max_age,
                include_subdomains: boolean("hsts-include-subdomains", true)?,
                preload: boolean("hsts-preload", false)?,
            });
        } else {
            config.hsts = None;
        }
        config.ssl_redirect = boolean("ssl-redirect", true)?;
        config.force_ssl_redirect = boolean("force-ssl-redirect", false)?;
        config.service_upstream = boolean("service-upstream", false)?;
        config.log_unmatched = boolean("enable-access-log-for-default-backend", false)?;
        if let Some(v) = get("proxy-body-size") {
            config.route_defaults.max_body = parse_size(v).map_err(|e| error(Some("proxy-body-size"), e))?;
        }
        let defaults = &mut config.route_defaults;
        for (key, slot) in [
            ("proxy-connect-timeout", &mut defaults.connect_timeout),
            ("proxy-send-timeout", &mut defaults.send_timeout),
            ("proxy-read-timeout", &mut defaults.read_timeout),
        ] {
            if let Some(v) = get(key) {
                *slot = Some(parse_seconds(v).map_err(|e| error(Some(key), e))?);
            }
        }
        if let Some(v) = get("global-allowed-response-headers") {
            config.allowed_response_headers =
                v.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_string).collect();
        }
        if let Some(v) = get("default-backend-service") {
            let reference = v.split_once('/').filter(|(ns, name)| valid_name(ns) && valid_name(name));
            let (namespace, name) = reference.ok_or_else(|| {
                error(Some("default-backend-service"), format!("`{v}` is not namespace/name of a Service"))
            })?;
            config.default_backend = Some((namespace.to_string(), name.to_string()));
        }
        if let Some(v) = get("custom-http-errors") {
            config.custom_http_errors = parse_codes(v).map_err(|e| error(Some("custom-http-errors"), e))?;
        }
        if let Some(v) = get("no-tls-redirect-locations") {
            let listed = v.split(',').map(str::trim).filter(|p| !p.is_empty());
            // ingress-nginx's default is the ACME challenge's path, which ramjet never redirects.
            let listed = listed.filter(|p| p.trim_end_matches('/') != ACME_CHALLENGE.trim_end_matches('/'));
            config.no_tls_redirect_locations = listed.map(str::to_string).collect();
            if let Some(bad) = config.no_tls_redirect_locations.iter().find(|p| !p.starts_with('/')) {
                return Err(error(Some("no-tls-redirect-locations"), format!("`{bad}` is not a path")));
            }
        }
        config.notes = notes(data);
        Ok(config)
    }

    /// The `Strict-Transport-Security` value, if HSTS is on.
    pub fn hsts_value(&self) -> Option<String> {
        self.hsts.as_ref().map(Hsts::value)
    }
}

/// A Kubernetes object name as a Service's must be (an RFC 1035 label).
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[bytes.len() - 1] != b'-'
}

/// The keys this module reads.
pub const READ: [&str; 16] = [
    "hsts",
    "hsts-max-age",
    "hsts-include-subdomains",
    "hsts-preload",
    "ssl-redirect",
    "force-ssl-redirect",
    "proxy-body-size",
    "proxy-connect-timeout",
    "proxy-send-timeout",
    "proxy-read-timeout",
    "global-allowed-response-headers",
    "default-backend-service",
    "custom-http-errors",
    "no-tls-redirect-locations",
    "service-upstream",
    "enable-access-log-for-default-backend",
];

/// What becomes of the keys the file sets but does not apply itself: the flag for a process
/// setting, or that ramjet does not read it.
fn notes(data: &BTreeMap<String, String>) -> Vec<String> {
    let rest: BTreeMap<String, String> =
        data.iter().filter(|(k, _)| !READ.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    let review = configmap::review("--config", &rest);
    let mut notes: Vec<String> = review
        .findings
        .iter()
        .filter(|f| f.verdict != Verdict::Honoured || f.detail.contains("set --"))
        .map(|f| format!("{}: a process setting, not read from the file: {}", f.key, f.detail))
        .collect();
    notes.extend(review.not_reviewed.iter().map(|k| format!("{k}: not read by ramjet")));
    notes
}

/// The file's data: a ConfigMap's `data`, or the file itself as a mapping. Values may be strings,
/// numbers or booleans (a ConfigMap's are strings; a hand-written file's need not be).
fn data_of(text: &str) -> Result<BTreeMap<String, String>, (String, Option<usize>)> {
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| (format!("not valid YAML: {e}"), e.location().map(|l| l.line())))?;
    let map = match &value {
        serde_yaml_ng::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml_ng::Value::Mapping(m) if m.get("kind").and_then(|k| k.as_str()) == Some("ConfigMap") => {
            match m.get("data") {
                None | Some(serde_yaml_ng::Value::Null) => return Ok(BTreeMap::new()),
                Some(serde_yaml_ng::Value::Mapping(data)) => data,
                Some(_) => return Err(("the ConfigMap's data is not a mapping".into(), None)),
            }
        }
        serde_yaml_ng::Value::Mapping(m) => m,
        _ => return Err(("not a mapping of keys to values, nor a ConfigMap".into(), Some(1))),
    };
    let mut data = BTreeMap::new();
    for (key, value) in map {
        let Some(key) = key.as_str() else {
            return Err((format!("the key {key:?} is not a string"), None));
        };
        let value = match value {
            serde_yaml_ng::Value::String(s) => s.clone(),
            serde_yaml_ng::Value::Bool(b) => b.to_string(),
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => return Err((format!("{key}: the value is not a string, a number or a boolean"), line_of(text, key))),
        };
        data.insert(key.to_string(), value);
    }
    Ok(data)
}

/// A ConfigMap mounted as a directory: each regular file is a key, its contents the value.
/// Kubernetes' own entries (`..data`, `..2024_…`) are hidden and skipped.
fn mounted(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut data = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        data.insert(name, std::fs::read_to_string(entry.path())?);
    }
    Ok(data)
}

/// The line (from 1) where `key` is set.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix('"')
                .and_then(|r| r.strip_prefix(key))
                .and_then(|r| r.strip_prefix('"'))
                .or_else(|| l.strip_prefix(key));
            l.is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// Go's `strconv.ParseBool`, as ingress-nginx reads its ConfigMap.
fn go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Why the file could not be used: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--config {}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Re-reads `path` every `interval` and submits the configuration each time the file's text
/// changes and reads well; a bad edit is logged once and the last good configuration stays.
pub async fn watch(
    path: PathBuf,
    interval: Duration,
    first: String,
    submit: impl Fn(ControllerConfig) + Send + 'static,
) {
    let mut last = first;
    let mut failing: Option<String> = None;
    loop {
        tokio::time::sleep(interval).await;
        let reading = path.clone();
        let Ok(read) = tokio::task::spawn_blocking(move || ControllerConfig::read(&reading)).await else { continue };
        match read {
            Ok((_, text)) if text == last => {}
            Ok((config, text)) => {
                tracing::info!(file = %path.display(), "controller configuration read");
                for note in &config.notes {
                    tracing::warn!(file = %path.display(), "{note}");
                }
                failing = None;
                last = text;
                submit(config);
            }
            Err(e) => {
                let said = e.to_string();
                if failing.as_deref() != Some(said.as_str()) {
                    tracing::warn!("{said}; keeping the configuration read before");
                    failing = Some(said);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ControllerConfig, ConfigError> {
        ControllerConfig::parse(text, Path::new("/etc/ramjet/config.yaml"))
    }

    #[test]
    fn an_empty_file_has_ingress_nginx_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config.hsts_value().as_deref(), Some("max-age=31536000; includeSubDomains"));
        assert!(config.ssl_redirect);
        assert_eq!(config.route_defaults.max_body, Some(1024 * 1024));
        assert_eq!(config.route_defaults.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(ControllerConfig::builtin().route_defaults, RouteDefaults::default());
    }

    #[test]
    fn a_configmap_or_its_data_are_read_alike() {
        let data =
            "hsts-max-age: \"600\"\nhsts-preload: \"true\"\nhsts-include-subdomains: false\nssl-redirect: \"false\"\n\
                    proxy-body-size: 8m\nproxy-read-timeout: \"120\"\n";
        let configmap = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: ingress-nginx-controller }}\ndata:\n{}",
            data.lines().map(|l| format!("  {l}\n")).collect::<String>()
        );
        for text in [data.to_string(), configmap] {
            let config = parse(&text).unwrap();
            assert_eq!(config.hsts_value().as_deref(), Some("max-age=600; preload"));
            assert!(!config.ssl_redirect);
            assert_eq!(config.route_defaults.max_body, Some(8 * 1024 * 1024));
            assert_eq!(config.route_defaults.read_timeout, Some(Duration::from_secs(120)));
        }
        assert_eq!(parse("hsts: \"false\"\n").unwrap().hsts, None);
    }

    #[test]
    fn a_bad_value_names_the_file_the_line_and_the_key() {
        let e = parse("hsts: \"true\"\nproxy-body-size: lots\n").unwrap_err();
        assert_eq!(e.to_string(), "--config /etc/ramjet/config.yaml:2: proxy-body-size: `lots` is not an nginx size (a number of bytes, or with k, m or g)");
        let e = parse("a: b\n\"ssl-redirect\": maybe\n").unwrap_err();
        assert!(e.to_string().starts_with("--config /etc/ramjet/config.yaml:2: ssl-redirect: `maybe`"), "{e}");
        let e = parse("hsts: [1]\n").unwrap_err();
        assert!(e.to_string().contains(":1: hsts: the value is not"), "{e}");
        assert!(parse("- a\n").is_err());
        assert!(parse("a: [\n").unwrap_err().line.is_some());
        for bad in ["web", "ingress-nginx/", "/web", "a/b/c", "Ns/web"] {
            let e = parse(&format!("default-backend-service: \"{bad}\"\n")).unwrap_err();
            assert!(e.to_string().contains(":1: default-backend-service: `"), "{bad}: {e}");
        }
        let e = parse("custom-http-errors: \"404,200\"\n").unwrap_err();
        assert!(e.to_string().contains(":1: custom-http-errors: `200` is not a status from 400 to 599"), "{e}");
    }

    #[test]
    fn the_default_backend_and_its_statuses_are_read() {
        let config =
            parse("default-backend-service: ingress-nginx/errors\ncustom-http-errors: 404, 503,404\n").unwrap();
        assert_eq!(config.default_backend, Some(("ingress-nginx".into(), "errors".into())));
        assert_eq!(config.custom_http_errors, [404, 503]);
        assert_eq!(parse("").unwrap().default_backend, None);
    }

    #[test]
    fn no_tls_redirect_locations_leave_out_the_acme_path_ramjet_never_redirects() {
        let read =
            |v: &str| parse(&format!("no-tls-redirect-locations: \"{v}\"\n")).map(|c| c.no_tls_redirect_locations);
        assert_eq!(read("/.well-known/acme-challenge").unwrap(), Vec::<String>::new());
        assert_eq!(read(" /a, ,/.well-known/acme-challenge/,/b/").unwrap(), ["/a", "/b/"]);
        assert!(read("a,/b").unwrap_err().to_string().contains("no-tls-redirect-locations: `a` is not a path"));
    }

    #[test]
    fn a_mounted_configmap_is_a_file_per_key() {
        let dir = std::env::temp_dir().join(format!("ramjet-config-mounted-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("..2026_12_05")).unwrap();
        std::fs::write(dir.join("hsts-max-age"), "120").unwrap();
        std::fs::write(dir.join("ssl-redirect"), "false").unwrap();
        std::fs::write(dir.join("..data"), "ignored").unwrap();
        let (config, text) = ControllerConfig::read(&dir).unwrap();
        assert_eq!(config.hsts_value().as_deref(), Some("max-age=120; includeSubDomains"));
        assert!(!config.ssl_redirect);
        std::fs::write(dir.join("proxy-body-size"), "huge").unwrap();
        let e = ControllerConfig::read(&dir).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("proxy-body-size"), "{e}");
        assert_ne!(text, "");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn process_settings_and_unknown_keys_are_noted() {
        let config =
            parse("use-forwarded-headers: \"true\"\nproxy-real-ip-cidr: 10.0.0.0/8\nworker-processes: \"4\"\n")
                .unwrap();
        assert!(
            config
                .notes
                .iter()
                .any(|n| n.starts_with("use-forwarded-headers:") && n.contains("--trusted-proxies=10.0.0.0/8")),
            "{:?}",
            config.notes
        );
        assert!(config.notes.contains(&"worker-processes: not read by ramjet".to_string()), "{:?}", config.notes);
    }
}
