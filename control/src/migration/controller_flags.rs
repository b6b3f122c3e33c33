//! ingress-nginx's controller flags (the `args` of its Deployment or DaemonSet), judged for
//! `ramjet migration-report --nginx-controller`: what ramjet does with each, and the ramjet flags
//! that keep them. The flag `--configmap` names the controller ConfigMap, which the report then
//! judges too ([`super::configmap`]).

use std::collections::BTreeMap;

use super::configmap::SettingFinding;
use crate::compile::annotations::{Verdict, NGINX_PREFIX};

/// The review of one controller's flags.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FlagsReport {
    /// The object the flags came from (`Deployment ingress-nginx/ingress-nginx-controller`).
    pub controller: String,
    pub findings: Vec<SettingFinding>,
    /// The ramjet flags that keep these (`--flag=value` each).
    pub flags: Vec<String>,
    /// Flags not reviewed yet.
    pub not_reviewed: Vec<String>,
    /// `--configmap`: the controller ConfigMap (`namespace`, `name`).
    #[serde(skip)]
    pub configmap: Option<(String, String)>,
}

/// The flags of a command line (`/nginx-ingress-controller --a=b --c d --e`), by name without
/// dashes. A flag without `=` takes the next argument as its value unless that is a flag too; a
/// name that comes twice keeps its last value, as Go's flag package does.
pub fn parse(args: &[String]) -> BTreeMap<String, String> {
    let mut flags = BTreeMap::new();
    let mut rest = args.iter().skip_while(|a| !a.starts_with('-')).peekable();
    while let Some(arg) = rest.next() {
        let Some(name) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else { continue };
        let (name, value) = match name.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => match rest.peek() {
                Some(next) if !next.starts_with('-') && !BOOLEANS.contains(&name) => {
                    (name.to_string(), rest.next().cloned().unwrap_or_default())
                }
                _ => (name.to_string(), "true".to_string()),
            },
        };
        flags.insert(name, value);
    }
    flags
}

/// ingress-nginx's boolean flags among those judged here: written without a value.
const BOOLEANS: [&str; 9] = [
    "enable-ssl-passthrough",
    "enable-metrics",
    "update-status",
    "update-status-on-shutdown",
    "disable-catch-all",
    "watch-ingress-without-class",
    "ingress-class-by-name",
    "enable-topology-aware-routing",
    "enable-ssl-chain-completion",
];

/// What ramjet makes of each flag of `args`, from the object `controller` names, which runs in
/// `namespace`: the kubelet's `$(POD_NAMESPACE)` (the ingress-nginx chart writes it in
/// `--publish-service`) is that namespace.
pub fn review(controller: &str, namespace: &str, args: &[String]) -> FlagsReport {
    let args: Vec<String> = args.iter().map(|a| a.replace("$(POD_NAMESPACE)", namespace)).collect();
    let parsed = parse(&args);
    let mut report = FlagsReport {
        controller: controller.to_string(),
        findings: Vec::new(),
        flags: Vec::new(),
        not_reviewed: Vec::new(),
        configmap: None,
    };
    for (name, value) in &parsed {
        let mut keep = |flag: String| report.flags.push(flag);
        let judged = judge(name, value, &mut keep);
        match judged {
            Some((verdict, detail)) => {
                report.findings.push(SettingFinding { key: name.clone(), value: value.clone(), verdict, detail })
            }
            None => report.not_reviewed.push(name.clone()),
        }
    }
    report.configmap = parsed.get("configmap").and_then(|v| v.split_once('/')).map(|(n, m)| (n.into(), m.into()));
    report
}

/// One flag's verdict and what ramjet does; `None`: not reviewed yet. `keep` hears the ramjet
/// flags that keep it.
fn judge(name: &str, value: &str, keep: &mut impl FnMut(String)) -> Option<(Verdict, String)> {
    use Verdict::*;
    let on = matches!(value, "true" | "1" | "t" | "T" | "TRUE" | "True");
    let mut same = |flag: &str| {
        keep(format!("--{flag}={value}"));
        (Honoured, format!("set --{flag}={value}"))
    };
    Some(match name {
        "ingress-class" => same("ingress-class"),
        "controller-class" => same("controller-name"),
        "watch-namespace" if !value.is_empty() => same("watch-namespace"),
        "watch-namespace" => (Honoured, "all namespaces, as ramjet watches without --watch-namespace".into()),
        "default-ssl-certificate" => same("default-ssl-certificate"),
        "publish-service" => same("publish-service"),
        "publish-status-address" => same("publish-address"),
        "election-id" => same("election-id"),
        "configmap" => (
            Honoured,
            format!(
                "give ramjet this ConfigMap with --config (chart: controller.config.existingConfigMap); its keys are \
                 judged below ({value})"
            ),
        ),
        "ingress-class-by-name" => (Honoured, "ramjet matches IngressClasses by name and controller alike".into()),
        "enable-ssl-passthrough" => (
            Honoured,
            "ssl-passthrough annotations are always honoured: TLS for their hosts is passed on unopened".into(),
        ),
        "annotations-prefix" if value.trim_end_matches('/') == NGINX_PREFIX.trim_end_matches('/') => {
            (Honoured, "ingress-nginx's default prefix, which ramjet reads".into())
        }
        "annotations-prefix" => (
            Refused,
            format!("ramjet reads only {NGINX_PREFIX} and ramjet.dev/; annotations under {value}/ are not read"),
        ),
        "http-port" => {
            keep(format!("--http-addr=0.0.0.0:{value}"));
            (Honoured, format!("set --http-addr=0.0.0.0:{value}"))
        }
        "https-port" => {
            keep(format!("--https-addr=0.0.0.0:{value}"));
            (Honoured, format!("set --https-addr=0.0.0.0:{value}"))
        }
        "shutdown-grace-period" => {
            keep(format!("--shutdown-delay={value}s"));
            (Approximated, format!("set --shutdown-delay={value}s: ready turns false, then the listeners close"))
        }
        "healthz-port" | "health-check-path" | "healthz-host" => (
            Approximated,
            "liveness and readiness are the admin listener's /healthz and /readyz (--admin-addr; the chart's probes)"
                .into(),
        ),
        "enable-metrics"
        | "metrics-per-host"
        | "metrics-per-undefined-host"
        | "time-buckets"
        | "length-buckets"
        | "size-buckets"
        | "exclude-socket-metrics" => (
            Approximated,
            "ramjet's Prometheus metrics are always on (--metrics-addr), per route and backend (docs/metrics.md)"
                .into(),
        ),
        "validating-webhook"
        | "validating-webhook-certificate"
        | "validating-webhook-key"
        | "enable-annotation-validation"
        | "disable-full-test" => (
            Approximated,
            "no webhook: the chart's admissionPolicy.enabled installs a ValidatingAdmissionPolicy that refuses what \
             ramjet would refuse (docs/admission-policy.md)"
                .into(),
        ),
        "update-status" if on => {
            (Honoured, "ramjet's leader writes Ingress status (--publish-service or --publish-address)".into())
        }
        "update-status" => {
            (Ignored, "ramjet writes Ingress status whenever --publish-service or --publish-address is set".into())
        }
        "update-status-on-shutdown" => (Ignored, "status is left as it is when ramjet stops".into()),
        "v" => (Approximated, "set RAMJET_LOG (info by default; debug for more)".into()),
        "sync-period" | "sync-rate-limit" => (
            Approximated,
            "ramjet follows the API server's watches and publishes each change as it comes (no periodic resync)".into(),
        ),
        "tcp-services-configmap" | "udp-services-configmap" => (
            Ignored,
            "not read: write each entry as a Gateway API TCPRoute or UDPRoute, or a routes file tcp: / udp: entry \
             (docs/gateway-api.md)"
                .into(),
        ),
        "default-backend-service" => (
            Honoured,
            format!(
                "add `default-backend-service: {value}` to the controller configuration (--config; chart: \
                 controller.config.data): it answers what no Ingress matches and the custom-http-errors statuses"
            ),
        ),
        "disable-catch-all" => (Ignored, "an Ingress without rules still serves its spec.defaultBackend".into()),
        "watch-namespace-selector" => {
            (Ignored, "ramjet watches one namespace (--watch-namespace) or all of them, not a label selector".into())
        }
        "enable-topology-aware-routing" => (Ignored, "endpoints are used whatever their zone".into()),
        "enable-ssl-chain-completion" => (Ignored, "certificates are served with the chain their Secret holds".into()),
        "maxmind-license-key" | "maxmind-edition-ids" | "maxmind-mirror" => (Ignored, "no GeoIP databases".into()),
        _ => return None,
    })
}

/// The command line of ingress-nginx's controller container in a Deployment or DaemonSet object:
/// the container whose command or args run `nginx-ingress-controller` (else the first), its
/// `command` then its `args`.
pub fn controller_args(workload: &serde_yaml_ng::Value) -> Vec<String> {
    let containers = ["spec", "template", "spec", "containers"]
        .iter()
        .try_fold(workload, |v, k| v.get(*k))
        .and_then(|c| c.as_sequence())
        .cloned()
        .unwrap_or_default();
    let line = |c: &serde_yaml_ng::Value| -> Vec<String> {
        ["command", "args"]
            .iter()
            .filter_map(|k| c.get(*k).and_then(|v| v.as_sequence()))
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let lines: Vec<Vec<String>> = containers.iter().map(line).collect();
    let controller = lines.iter().position(|l| l.iter().any(|a| a.contains("nginx-ingress-controller")));
    lines.into_iter().nth(controller.unwrap_or(0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags_are_read_as_go_reads_them() {
        let parsed = parse(&args(
            "/nginx-ingress-controller --election-id=ingress-nginx-leader --ingress-class nginx \
             --enable-ssl-passthrough --watch-namespace= -v=2 --ingress-class=other",
        ));
        assert_eq!(parsed["election-id"], "ingress-nginx-leader");
        assert_eq!(parsed["ingress-class"], "other", "the last one wins");
        assert_eq!(parsed["enable-ssl-passthrough"], "true");
        assert_eq!(parsed["watch-namespace"], "");
        assert_eq!(parsed["v"], "2");
    }

    #[test]
    fn the_chart_default_flags_become_ramjet_flags() {
        // ingress-nginx's Helm chart renders these by default.
        let report = review(
            "Deployment ingress-nginx/ingress-nginx-controller",
            "ingress-nginx",
            &args(
                "/nginx-ingress-controller --publish-service=$(POD_NAMESPACE)/ingress-nginx-controller \
                 --election-id=ingress-nginx-leader --controller-class=k8s.io/ingress-nginx --ingress-class=nginx \
                 --configmap=ingress-nginx/ingress-nginx-controller --validating-webhook=:8443 \
                 --validating-webhook-certificate=/usr/local/certificates/cert \
                 --validating-webhook-key=/usr/local/certificates/key --enable-metrics=false --something-new=1",
            ),
        );
        assert_eq!(
            report.flags,
            [
                "--controller-name=k8s.io/ingress-nginx",
                "--election-id=ingress-nginx-leader",
                "--ingress-class=nginx",
                "--publish-service=ingress-nginx/ingress-nginx-controller",
            ]
        );
        assert_eq!(report.configmap, Some(("ingress-nginx".into(), "ingress-nginx-controller".into())));
        assert_eq!(report.not_reviewed, ["something-new"]);
        let verdict = |key: &str| report.findings.iter().find(|f| f.key == key).map(|f| f.verdict);
        assert_eq!(verdict("validating-webhook"), Some(Verdict::Approximated));
        assert_eq!(verdict("configmap"), Some(Verdict::Honoured));
    }

    #[test]
    fn the_controller_container_is_found_in_its_deployment() {
        let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: c, namespace: n }\nspec:\n  template:\n    spec:\n      containers:\n      - name: sidecar\n        args: [--x]\n      - name: controller\n        args: [/nginx-ingress-controller, --ingress-class=nginx]\n";
        let found = super::super::find_object_in_yaml(yaml, &["Deployment", "DaemonSet"], "n", "c").unwrap();
        assert_eq!(controller_args(&found), ["/nginx-ingress-controller", "--ingress-class=nginx"]);
    }

    #[test]
    fn another_annotation_prefix_is_refused() {
        let report = review("x", "n", &args("--annotations-prefix=custom.example.com"));
        assert_eq!(report.findings[0].verdict, Verdict::Refused);
        let report = review("x", "n", &args("--annotations-prefix=nginx.ingress.kubernetes.io"));
        assert_eq!(report.findings[0].verdict, Verdict::Honoured);
    }

    #[test]
    fn the_default_backend_flag_goes_to_the_controller_configuration() {
        let report = review("x", "n", &args("--default-backend-service=ingress-nginx/errors"));
        assert_eq!(report.findings[0].verdict, Verdict::Honoured);
        assert!(report.findings[0].detail.contains("`default-backend-service: ingress-nginx/errors`"));
    }
}
