//! ingress-nginx's controller ConfigMap (its `--configmap`), judged for `ramjet migration-report
//! --nginx-configmap`: what ramjet does with each setting it knows and the daemon flags that keep
//! it. Ramjet reads the global defaults from the ConfigMap itself (`--config`); the process
//! settings are flags, which the chart sets, so the report says which flags to set.
//!
//! Reviewed so far: the settings of the client's address — `use-proxy-protocol`,
//! `proxy-protocol-header-timeout`, `use-forwarded-headers`, `enable-real-ip`,
//! `proxy-real-ip-cidr`, `forwarded-for-header`, `compute-full-forwarded-for` and
//! `forwarded-for-proxy-protocol-header`, read as ingress-nginx's template
//! (`rootfs/etc/nginx/template/nginx.tmpl`) reads them; OpenTelemetry's (`enable-opentelemetry`,
//! `otlp-collector-*`, `otel-*`, `opentelemetry-*`), with ingress-nginx's defaults
//! (`internal/ingress/controller/config/config.go`); and the access log's line format
//! (`log-format-upstream`); and the global defaults that `--config` reads from the ConfigMap itself
//! (`hsts*`, `ssl-redirect`, `force-ssl-redirect`, `proxy-body-size`, the proxy timeouts; see
//! [`crate::config_file`]). Other keys are listed as not reviewed.

use std::collections::BTreeMap;
use std::time::Duration;

use ramjet_shared::parse_ranges;

use crate::compile::annotations::Verdict;

/// The keys reviewed besides those `--config` reads ([`crate::config_file::READ`], reported
/// first), in the order they are reported.
pub const KEYS: [&str; 21] = [
    "use-proxy-protocol",
    "proxy-protocol-header-timeout",
    "use-forwarded-headers",
    "enable-real-ip",
    "proxy-real-ip-cidr",
    "forwarded-for-header",
    "compute-full-forwarded-for",
    "forwarded-for-proxy-protocol-header",
    "enable-opentelemetry",
    "otlp-collector-host",
    "otlp-collector-port",
    "otel-service-name",
    "otel-sampler",
    "otel-sampler-ratio",
    "otel-sampler-parent-based",
    "opentelemetry-trust-incoming-span",
    "opentelemetry-operation-name",
    "otel-max-queuesize",
    "log-format-upstream",
    "log-format-escape-json",
    "log-format-escape-none",
];

/// ingress-nginx's `log-format-upstream` default, which `--access-log-format=nginx-upstream` writes.
const NGINX_UPSTREAM_FORMAT: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \
     \"$http_referer\" \"$http_user_agent\" $request_length $request_time [$proxy_upstream_name] \
     [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time \
     $upstream_status $req_id";

/// ingress-nginx's default `proxy-real-ip-cidr`.
const DEFAULT_CIDR: &str = "0.0.0.0/0";
const DEFAULT_HEADER: &str = "X-Forwarded-For";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// One ConfigMap key, judged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SettingFinding {
    pub key: String,
    pub value: String,
    pub verdict: Verdict,
    /// What ramjet does, and the flag to set.
    pub detail: String,
}

/// The ConfigMap's review.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SettingsReport {
    /// `namespace/name`.
    pub configmap: String,
    pub findings: Vec<SettingFinding>,
    /// The daemon flags that keep these settings (`--flag=value` each); the chart's values are in
    /// the details.
    pub flags: Vec<String>,
    /// Keys of the ConfigMap that are not reviewed yet.
    pub not_reviewed: Vec<String>,
}

/// Go's `strconv.ParseBool`, which ingress-nginx reads booleans with.
fn go_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Judges the ConfigMap `configmap` (`namespace/name`) whose data is `data`.
pub fn review(configmap: &str, data: &BTreeMap<String, String>) -> SettingsReport {
    let get = |key: &str| data.get(key).map(|v| v.trim());
    let on = |key: &str| get(key).and_then(go_bool).unwrap_or(false);
    let proxy = on("use-proxy-protocol");
    let forwarded = on("use-forwarded-headers");
    let real_ip = on("enable-real-ip");
    let full = on("compute-full-forwarded-for");
    let cidr = get("proxy-real-ip-cidr").unwrap_or(DEFAULT_CIDR);
    let trusted = parse_ranges(cidr).map(|blocks| blocks.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(","));
    let header = get("forwarded-for-header").unwrap_or(DEFAULT_HEADER);
    let timeout = get("proxy-protocol-header-timeout");

    let mut flags = Vec::new();
    if proxy {
        flags.push("--proxy-protocol=http,https".to_string());
        if let Some(t) = timeout.filter(|t| humantime::parse_duration(t).is_ok_and(|d| d != DEFAULT_TIMEOUT)) {
            flags.push(format!("--proxy-protocol-timeout={t}"));
        }
    }
    let believes_headers = forwarded || real_ip;
    if believes_headers {
        if let Ok(list) = &trusted {
            flags.push(format!("--trusted-proxies={list}"));
        }
        if !header.eq_ignore_ascii_case(DEFAULT_HEADER) {
            flags.push(format!("--forwarded-for-header={header}"));
        }
        if forwarded && full {
            flags.push("--compute-full-forwarded-for".to_string());
        }
        if !forwarded {
            flags.push("--trusted-proxies-address-only".to_string());
        }
    }
    let everyone = trusted.as_ref().is_ok_and(|t| t.split(',').any(|b| b == "0.0.0.0/0" || b == "::/0"));
    let trusted_flag = match &trusted {
        Ok(list) => format!("set --trusted-proxies={list} (chart: controller.clientAddress.trustedProxies)"),
        Err(e) => format!("proxy-real-ip-cidr is not a list ramjet can read ({e}): fix it, then set --trusted-proxies"),
    };
    let everyone_warning = if everyone {
        "; proxy-real-ip-cidr trusts every address of a family (0.0.0.0/0, ingress-nginx's default, or ::/0), so \
         any client can name its own: list only your load balancers' ranges"
    } else {
        ""
    };

    // Traces: ingress-nginx sends OTLP over gRPC to otlp-collector-host:otlp-collector-port (4317);
    // ramjet sends OTLP over HTTP, to the collector's OTLP/HTTP port (4318 by default).
    let otel = on("enable-opentelemetry");
    let collector = get("otlp-collector-host").filter(|h| !h.is_empty());
    let sampler = get("otel-sampler").unwrap_or("AlwaysOn");
    let ratio = get("otel-sampler-ratio").and_then(|r| r.parse::<f64>().ok()).filter(|r| (0.0..=1.0).contains(r));
    if otel {
        if let Some(host) = collector {
            flags.push(format!("--otlp-endpoint=http://{host}:4318"));
        }
        match sampler {
            "AlwaysOff" => flags.push("--trace-sample-ratio=0".into()),
            "TraceIdRatioBased" => flags.push(format!("--trace-sample-ratio={}", ratio.unwrap_or(0.01))),
            _ => {}
        }
        if get("otel-sampler-parent-based").and_then(go_bool) == Some(false) {
            flags.push("--trace-parent-based=false".into());
        }
        if let Some(name) = get("otel-service-name").filter(|n| !n.is_empty()) {
            flags.push(format!("--trace-service-name={name}"));
        }
    }
    let only_with_otel = || (Verdict::Honoured, "read only with enable-opentelemetry: nothing to do".to_string());
    let same_line =
        get("log-format-upstream").map(|f| f.split_whitespace().eq(NGINX_UPSTREAM_FORMAT.split_whitespace()));
    // A line of one's own is written by the template, with the escaping the ConfigMap asks for.
    let escape = match (on("log-format-escape-json"), on("log-format-escape-none")) {
        (_, true) => "none",
        (true, false) => "json",
        (false, false) => "default",
    };
    match (same_line, get("log-format-upstream")) {
        (Some(true), _) => flags.push("--access-log-format=nginx-upstream".into()),
        (Some(false), Some(line)) => {
            // Quoted for a shell: the line has spaces and quotes of its own.
            flags.push(format!("--access-log-template='{}'", line.replace('\'', "'\\''")));
            if escape != "default" {
                flags.push(format!("--access-log-escape={escape}"));
            }
        }
        _ => {}
    }

    let mut findings = Vec::new();
    for key in crate::config_file::READ.into_iter().chain(KEYS) {
        let Some(value) = get(key) else { continue };
        let default = |detail: &str| (Verdict::Honoured, format!("ingress-nginx's default{detail}: nothing to do"));
        let bad_bool = || {
            (Verdict::Ignored, format!("`{value}` is not a boolean ingress-nginx reads; it keeps its default (false)"))
        };
        let (verdict, detail) = match key {
            key if crate::config_file::READ.contains(&key) => (
                Verdict::Honoured,
                "read from the controller configuration: give ramjet this ConfigMap with --config (chart: \
                 controller.config.existingConfigMap), as ingress-nginx reads it (docs/configuration.md)"
                    .to_string(),
            ),
            "use-proxy-protocol" => match go_bool(value) {
                None => bad_bool(),
                Some(false) => default(""),
                Some(true) => (
                    Verdict::Approximated,
                    "set --proxy-protocol=http,https (chart: controller.clientAddress.proxyProtocol.http and .https): \
                     both listeners expect a PROXY protocol header (v1 or v2) and refuse a connection without one. \
                     Ramjet believes the header from any peer of those listeners; ingress-nginx also required the \
                     peer to be in proxy-real-ip-cidr (by default any IPv4 address)"
                        .to_string(),
                ),
            },
            "proxy-protocol-header-timeout" => match humantime::parse_duration(value) {
                Ok(d) if d == DEFAULT_TIMEOUT => default(" (5s)"),
                Ok(_) if proxy => (
                    Verdict::Honoured,
                    format!(
                        "set --proxy-protocol-timeout={value} (chart: controller.clientAddress.proxyProtocol.timeout)"
                    ),
                ),
                Ok(_) => (Verdict::Honoured, "read only with use-proxy-protocol: nothing to do".to_string()),
                Err(_) => (Verdict::Ignored, format!("`{value}` is not a duration; ramjet's default (5s) applies")),
            },
            "use-forwarded-headers" => match go_bool(value) {
                None => bad_bool(),
                Some(false) => default(""),
                Some(true) => (
                    Verdict::Approximated,
                    format!(
                        "{trusted_flag}: the client's address is the right-most address of {header} that is not a \
                         trusted proxy's, from trusted peers only (nginx's real_ip_recursive). Their first \
                         X-Forwarded-Proto (http or https), -Port and -Host are passed on as the client's, and \
                         X-Forwarded-Proto: https stops the HTTPS redirect{everyone_warning}"
                    ),
                ),
            },
            "enable-real-ip" => match go_bool(value) {
                None => bad_bool(),
                Some(false) => default(""),
                Some(true) if forwarded => (
                    Verdict::Honoured,
                    format!(
                        "{trusted_flag}: the client's address is read from {header} of trusted peers{everyone_warning}"
                    ),
                ),
                Some(true) => (
                    Verdict::Honoured,
                    format!(
                        "{trusted_flag} and --trusted-proxies-address-only (chart: \
                         controller.clientAddress.trustedProxiesAddressOnly): the client's address is read from \
                         {header} of trusted peers; their X-Forwarded-Host, -Proto and -Port are ramjet's own, as \
                         without use-forwarded-headers{everyone_warning}"
                    ),
                ),
            },
            "proxy-real-ip-cidr" => match (&trusted, believes_headers, proxy) {
                (Err(e), true, _) => (Verdict::Ignored, format!("not a list ramjet can read ({e})")),
                (Ok(list), true, _) => (Verdict::Honoured, format!("the trusted proxies: --trusted-proxies={list}")),
                (_, false, true) => (
                    Verdict::Approximated,
                    "with use-proxy-protocol alone it says whose PROXY header ingress-nginx believes; ramjet \
                     believes the header from any peer of a listener that expects one"
                        .to_string(),
                ),
                (_, false, false) => (
                    Verdict::Honoured,
                    "read only with use-forwarded-headers, enable-real-ip or use-proxy-protocol: nothing to do"
                        .to_string(),
                ),
            },
            "forwarded-for-header" if value.eq_ignore_ascii_case(DEFAULT_HEADER) => default(" (X-Forwarded-For)"),
            "forwarded-for-header" if believes_headers => (
                Verdict::Honoured,
                format!("set --forwarded-for-header={value} (chart: controller.clientAddress.forwardedForHeader)"),
            ),
            "forwarded-for-header" => {
                (Verdict::Honoured, "read only with use-forwarded-headers or enable-real-ip: nothing to do".to_string())
            }
            "compute-full-forwarded-for" => match go_bool(value) {
                None => bad_bool(),
                Some(false) => default(""),
                Some(true) if forwarded => (
                    Verdict::Honoured,
                    "set --compute-full-forwarded-for (chart: controller.clientAddress.computeFullForwardedFor): \
                     X-Forwarded-For upstream is the client's own with the peer appended"
                        .to_string(),
                ),
                Some(true) => (
                    Verdict::Honoured,
                    "ingress-nginx reads it only with use-forwarded-headers: nothing to do".to_string(),
                ),
            },
            "forwarded-for-proxy-protocol-header" => (
                Verdict::Honoured,
                "the name of a field internal to ingress-nginx's template: nothing to set".to_string(),
            ),
            "enable-opentelemetry" => match (go_bool(value), collector) {
                (None, _) => bad_bool(),
                (Some(false), _) => default(""),
                (Some(true), Some(host)) => (
                    Verdict::Approximated,
                    format!(
                        "set --otlp-endpoint=http://{host}:4318 (chart: controller.tracing.otlpEndpoint): a span per \
                         sampled request, W3C trace context in and out. Ramjet sends OTLP over HTTP, to the \
                         collector's OTLP/HTTP port (4318 by default), not ingress-nginx's gRPC port"
                    ),
                ),
                (Some(true), None) => (
                    Verdict::Approximated,
                    "set --otlp-endpoint to your collector's OTLP/HTTP URL (http://HOST:4318); \
                     otlp-collector-host is not set"
                        .to_string(),
                ),
            },
            "otlp-collector-host" | "otlp-collector-port" if !otel => only_with_otel(),
            "otlp-collector-host" => (Verdict::Honoured, "in --otlp-endpoint".to_string()),
            "otlp-collector-port" => (
                Verdict::Approximated,
                "ingress-nginx's port is the collector's OTLP/gRPC one; ramjet uses its OTLP/HTTP port (4318 unless \
                 the collector says otherwise) in --otlp-endpoint"
                    .to_string(),
            ),
            "otel-service-name"
            | "otel-sampler"
            | "otel-sampler-ratio"
            | "otel-sampler-parent-based"
            | "otel-max-queuesize"
                if !otel =>
            {
                only_with_otel()
            }
            "otel-service-name" => (Verdict::Honoured, format!("set --trace-service-name={value}")),
            "otel-sampler" => match value {
                "AlwaysOn" => default(" (AlwaysOn): ramjet's --trace-sample-ratio=1 too"),
                "AlwaysOff" => {
                    (Verdict::Honoured, "set --trace-sample-ratio=0 (a sampled parent is still followed)".into())
                }
                "TraceIdRatioBased" => (
                    Verdict::Approximated,
                    format!(
                        "set --trace-sample-ratio={}: ramjet draws each root request at random rather than by its \
                         trace id",
                        ratio.unwrap_or(0.01)
                    ),
                ),
                _ => (Verdict::Ignored, format!("`{value}` is not a sampler ingress-nginx knows")),
            },
            "otel-sampler-ratio" if sampler != "TraceIdRatioBased" => {
                (Verdict::Honoured, "read only with otel-sampler: TraceIdRatioBased: nothing to do".to_string())
            }
            "otel-sampler-ratio" => match ratio {
                Some(r) => (Verdict::Honoured, format!("set --trace-sample-ratio={r}")),
                None => (Verdict::Ignored, format!("`{value}` is not a ratio between 0 and 1")),
            },
            "otel-sampler-parent-based" => match go_bool(value) {
                None => bad_bool(),
                Some(true) => default(" (true): ramjet follows the parent too"),
                Some(false) => (Verdict::Honoured, "set --trace-parent-based=false".to_string()),
            },
            "otel-max-queuesize" => (
                Verdict::Approximated,
                "ramjet's queue is per worker: --trace-queue (2048 spans each); more are dropped and counted \
                 (ramjet_trace_spans_total{outcome=\"dropped\"})"
                    .to_string(),
            ),
            "opentelemetry-trust-incoming-span" => match go_bool(value) {
                None => bad_bool(),
                Some(true) => default(""),
                Some(false) => (
                    Verdict::Ignored,
                    "ramjet always continues a valid incoming trace (its span is the client's span's child)"
                        .to_string(),
                ),
            },
            "opentelemetry-operation-name" if value.trim().is_empty() => default(" (the request's method)"),
            "opentelemetry-operation-name" => match ramjet_shared::operation_name::OperationName::parse(value.trim()) {
                Ok(_) => {
                    flags.push(format!("--trace-operation-name={}", value.trim()));
                    (
                        Verdict::Honoured,
                        format!(
                            "set --trace-operation-name='{}' (chart: controller.tracing.operationName)",
                            value.trim()
                        ),
                    )
                }
                Err(e) => (Verdict::Ignored, format!("{e}; spans are named by their method")),
            },
            "log-format-upstream" => match same_line {
                Some(true) => (
                    Verdict::Honoured,
                    "ingress-nginx's default line: set --access-log-format=nginx-upstream (chart: \
                     controller.accessLog.format)"
                        .to_string(),
                ),
                _ => {
                    let (_, missing) = ramjet_shared::log_line::parse(value);
                    let missing: Vec<String> = missing.iter().map(|m| format!("${m}")).collect();
                    let how = "set --access-log-template with this line (chart: controller.accessLog.template)";
                    match missing.is_empty() {
                        true => (Verdict::Honoured, how.to_string()),
                        false => (
                            Verdict::Approximated,
                            format!(
                                "{how}; ramjet has no {}: written as nginx writes an empty variable",
                                missing.join(", ")
                            ),
                        ),
                    }
                }
            },
            "log-format-escape-json" | "log-format-escape-none" => (
                Verdict::Honoured,
                format!(
                    "a line of your own is escaped as this says: set --access-log-escape={escape} (chart: \
                     controller.accessLog.escape); --access-log-format=json always writes valid JSON"
                ),
            ),
            _ => unreachable!("every key of KEYS has a verdict"),
        };
        findings.push(SettingFinding { key: key.to_string(), value: value.to_string(), verdict, detail });
    }
    let reviewed = |k: &str| KEYS.contains(&k) || crate::config_file::READ.contains(&k);
    let not_reviewed = data.keys().filter(|k| !reviewed(k)).cloned().collect();
    SettingsReport { configmap: configmap.to_string(), findings, flags, not_reviewed }
}

/// The `data` of ConfigMap `namespace/name` among the YAML files of `dir` (and its subdirectories),
/// for `migration-report --manifests`.
pub fn find_in_dir(
    dir: &std::path::Path,
    namespace: &str,
    name: &str,
) -> std::io::Result<Option<BTreeMap<String, String>>> {
    Ok(super::find_object_in_dir(dir, &["ConfigMap"], namespace, name)?.map(|item| data_of(&item)))
}

/// The `data` of ConfigMap `namespace/name` in one YAML text (documents or a `List`).
pub fn find_in_yaml(text: &str, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
    super::find_object_in_yaml(text, &["ConfigMap"], namespace, name).map(|item| data_of(&item))
}

/// A ConfigMap's `data`, its scalars as text.
fn data_of(item: &serde_yaml_ng::Value) -> BTreeMap<String, String> {
    let data = item.get("data").and_then(|d| d.as_mapping()).cloned().unwrap_or_default();
    let scalar = |v: &serde_yaml_ng::Value| match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    data.iter().filter_map(|(k, v)| Some((scalar(k)?, scalar(v)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn verdict(report: &SettingsReport, key: &str) -> (Verdict, String) {
        let f = report.findings.iter().find(|f| f.key == key).unwrap_or_else(|| panic!("{key}: {report:#?}"));
        (f.verdict, f.detail.clone())
    }

    #[test]
    fn defaults_ask_for_no_flag() {
        let r = review(
            "ingress-nginx/ingress-nginx-controller",
            &data(&[
                ("use-proxy-protocol", "false"),
                ("use-forwarded-headers", "false"),
                ("compute-full-forwarded-for", "false"),
                ("proxy-real-ip-cidr", "0.0.0.0/0"),
                ("forwarded-for-header", "X-Forwarded-For"),
                ("allow-snippet-annotations", "false"),
            ]),
        );
        assert!(r.flags.is_empty(), "{r:#?}");
        assert!(r.findings.iter().all(|f| f.verdict == Verdict::Honoured), "{r:#?}");
        assert_eq!(r.not_reviewed, ["allow-snippet-annotations"]);
    }

    #[test]
    fn proxy_protocol_behind_a_tcp_balancer() {
        let r = review("ns/cm", &data(&[("use-proxy-protocol", "true"), ("proxy-protocol-header-timeout", "10s")]));
        assert_eq!(r.flags, ["--proxy-protocol=http,https", "--proxy-protocol-timeout=10s"]);
        assert_eq!(verdict(&r, "use-proxy-protocol").0, Verdict::Approximated);
        assert!(verdict(&r, "proxy-protocol-header-timeout").1.contains("--proxy-protocol-timeout=10s"));
    }

    #[test]
    fn forwarded_headers_behind_an_http_balancer() {
        let r = review(
            "ns/cm",
            &data(&[
                ("use-forwarded-headers", "true"),
                ("proxy-real-ip-cidr", "10.0.0.0/8, 192.168.0.0/16"),
                ("forwarded-for-header", "CF-Connecting-IP"),
                ("compute-full-forwarded-for", "true"),
            ]),
        );
        assert_eq!(
            r.flags,
            [
                "--trusted-proxies=10.0.0.0/8,192.168.0.0/16",
                "--forwarded-for-header=CF-Connecting-IP",
                "--compute-full-forwarded-for"
            ]
        );
        let (v, detail) = verdict(&r, "use-forwarded-headers");
        assert_eq!(v, Verdict::Approximated);
        assert!(detail.contains("X-Forwarded-Proto") && !detail.contains("any client"), "{detail}");
    }

    #[test]
    fn the_default_cidr_trusts_everyone_and_the_report_says_so() {
        let r = review("ns/cm", &data(&[("use-forwarded-headers", "True")]));
        assert_eq!(r.flags, ["--trusted-proxies=0.0.0.0/0"]);
        assert!(verdict(&r, "use-forwarded-headers").1.contains("any client can name its own"));
    }

    #[test]
    fn proxy_protocol_and_forwarded_headers_together() {
        let r = review(
            "ns/cm",
            &data(&[("use-proxy-protocol", "1"), ("use-forwarded-headers", "t"), ("proxy-real-ip-cidr", "10.0.0.0/8")]),
        );
        assert_eq!(r.flags, ["--proxy-protocol=http,https", "--trusted-proxies=10.0.0.0/8"]);
    }

    #[test]
    fn settings_read_only_with_others_ask_for_nothing() {
        let r = review(
            "ns/cm",
            &data(&[
                ("compute-full-forwarded-for", "true"),
                ("forwarded-for-header", "X-Real-IP"),
                ("proxy-protocol-header-timeout", "9s"),
                ("forwarded-for-proxy-protocol-header", "X-Whatever"),
            ]),
        );
        assert!(r.flags.is_empty(), "{r:#?}");
        assert!(r.findings.iter().all(|f| f.verdict == Verdict::Honoured && f.detail.contains("nothing to")), "{r:#?}");
        let bad = review("ns/cm", &data(&[("use-proxy-protocol", "yes")]));
        assert_eq!(verdict(&bad, "use-proxy-protocol").0, Verdict::Ignored);
        assert!(bad.flags.is_empty());
    }

    #[test]
    fn opentelemetry_settings_become_trace_flags() {
        let r = review(
            "ns/cm",
            &data(&[
                ("enable-opentelemetry", "true"),
                ("otlp-collector-host", "otel.monitoring.svc"),
                ("otlp-collector-port", "4317"),
                ("otel-sampler", "TraceIdRatioBased"),
                ("otel-sampler-ratio", "0.1"),
                ("otel-sampler-parent-based", "false"),
                ("otel-service-name", "edge"),
                ("opentelemetry-trust-incoming-span", "false"),
            ]),
        );
        assert_eq!(
            r.flags,
            [
                "--otlp-endpoint=http://otel.monitoring.svc:4318",
                "--trace-sample-ratio=0.1",
                "--trace-parent-based=false",
                "--trace-service-name=edge"
            ]
        );
        assert_eq!(verdict(&r, "enable-opentelemetry").0, Verdict::Approximated);
        assert!(verdict(&r, "otlp-collector-port").1.contains("OTLP/HTTP"));
        assert_eq!(verdict(&r, "opentelemetry-trust-incoming-span").0, Verdict::Ignored);
        // Off: the other keys ask for nothing.
        let r = review("ns/cm", &data(&[("otel-sampler", "AlwaysOff"), ("otlp-collector-host", "x")]));
        assert!(r.flags.is_empty() && r.findings.iter().all(|f| f.detail.contains("nothing to do")), "{r:?}");
    }

    #[test]
    fn ingress_nginx_default_log_line_is_a_preset() {
        let line = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id";
        let r = review("ns/cm", &data(&[("log-format-upstream", line)]));
        assert_eq!(r.flags, ["--access-log-format=nginx-upstream"]);
        // A line of one's own: the template, quoted for a shell, with the escaping asked for.
        let own = [
            ("log-format-upstream", "{\"a\":\"$http_x_a\", \"t\":\"$opentelemetry_trace_id\"}"),
            ("log-format-escape-json", "true"),
        ];
        let r = review("ns/cm", &data(&own));
        assert_eq!(
            r.flags,
            [
                "--access-log-template='{\"a\":\"$http_x_a\", \"t\":\"$opentelemetry_trace_id\"}'",
                "--access-log-escape=json"
            ]
        );
        assert_eq!(verdict(&r, "log-format-upstream").0, Verdict::Honoured);
        let r = review("ns/cm", &data(&[("log-format-upstream", "it's $remote_addr $geoip_country_code")]));
        assert_eq!(r.flags, ["--access-log-template='it'\\''s $remote_addr $geoip_country_code'"]);
        let (verdict_of, detail) = verdict(&r, "log-format-upstream");
        assert_eq!(verdict_of, Verdict::Approximated);
        assert!(detail.contains("$geoip_country_code"), "{detail}");
    }

    #[test]
    fn the_configmap_is_found_among_yaml_documents() {
        let text = "kind: Service\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n  namespace: ingress-nginx\ndata:\n  use-proxy-protocol: \"true\"\n";
        let found = find_in_yaml(text, "ingress-nginx", "ingress-nginx-controller").unwrap();
        assert_eq!(found.get("use-proxy-protocol").map(String::as_str), Some("true"));
        assert!(find_in_yaml(text, "other", "ingress-nginx-controller").is_none());
        let list = "apiVersion: v1\nkind: List\nitems:\n  - kind: ConfigMap\n    metadata: {name: c, namespace: n}\n    data: {a: b, on: true}\n";
        let found = find_in_yaml(list, "n", "c").unwrap();
        assert_eq!(found.get("a").map(String::as_str), Some("b"));
        assert_eq!(found.get("on").map(String::as_str), Some("true"), "an unquoted boolean is read as its text");
    }
}
