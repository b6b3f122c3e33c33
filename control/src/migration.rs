//! `ramjet migration-report`: what ramjet would do with each annotation of a cluster's Ingresses,
//! before anyone switches from ingress-nginx.
//!
//! Ingresses come from the API server ([`crate::cluster::list_ingresses`]) or a manifests
//! directory; each is judged by the same registry the compiler uses
//! ([`crate::compile::annotations::review`]), so the report says exactly what the compiler will
//! warn about, refuse or leave out. With `--nginx-configmap`, ingress-nginx's controller ConfigMap
//! is judged too ([`configmap`]): the settings it knows and the daemon flags that keep them.
//! Rendered as text for people or JSON for scripts.

pub mod configmap;

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::api::networking::v1::Ingress;

use crate::compile::annotations::{review, Finding, Verdict};
use crate::compile::ingress::LEGACY_CLASS_ANNOTATION;
use configmap::SettingsReport;

/// One Ingress and what ramjet makes of its annotations.
#[derive(Debug, serde::Serialize)]
pub struct IngressReport {
    pub namespace: String,
    pub name: String,
    /// `spec.ingressClassName`, else the legacy class annotation.
    pub class: Option<String>,
    pub findings: Vec<Finding>,
}

/// The whole report, Ingresses in namespace/name order.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub ingresses: Vec<IngressReport>,
    /// ingress-nginx's controller ConfigMap, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsReport>,
    /// Findings per verdict.
    pub totals: BTreeMap<Verdict, usize>,
}

impl Report {
    /// Judges the Ingresses of `class` (all of them when `None`), as they come from ingress-nginx.
    pub fn new(ingresses: &[Ingress], class: Option<&str>) -> Report {
        let mut reports: Vec<IngressReport> = ingresses
            .iter()
            .map(|ingress| {
                let m = &ingress.metadata;
                let spec = ingress.spec.as_ref();
                let legacy = m.annotations.as_ref().and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
                let has_tls = spec.and_then(|s| s.tls.as_ref()).is_some_and(|tls| !tls.is_empty());
                IngressReport {
                    namespace: m.namespace.clone().unwrap_or_else(|| "default".into()),
                    name: m.name.clone().unwrap_or_default(),
                    class: spec.and_then(|s| s.ingress_class_name.clone()).or_else(|| legacy.cloned()),
                    findings: review(m.annotations.as_ref(), has_tls, true),
                }
            })
            .filter(|r| class.is_none() || r.class.as_deref() == class)
            .collect();
        reports.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut totals = BTreeMap::new();
        for finding in reports.iter().flat_map(|r| &r.findings) {
            *totals.entry(finding.verdict).or_insert(0) += 1;
        }
        Report { ingresses: reports, settings: None, totals }
    }

    /// Adds the review of ingress-nginx's controller ConfigMap.
    pub fn with_settings(mut self, settings: SettingsReport) -> Report {
        for finding in &settings.findings {
            *self.totals.entry(finding.verdict).or_insert(0) += 1;
        }
        self.settings = Some(settings);
        self
    }

    /// Nothing refused, ignored or unknown: every Ingress behaves under ramjet as it did.
    pub fn is_clean(&self) -> bool {
        self.totals.keys().all(|v| v.is_faithful())
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    /// One block per Ingress with a line per finding, then the totals.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for ingress in &self.ingresses {
            let class = ingress.class.as_deref().unwrap_or("(no class)");
            let _ = writeln!(out, "Ingress {}/{} (class {class})", ingress.namespace, ingress.name);
            if ingress.findings.is_empty() {
                let _ = writeln!(out, "  no ingress-nginx or ramjet annotations");
            }
            for f in &ingress.findings {
                let value = match &f.value {
                    Some(v) => format!("={}", one_line(v)),
                    None => " (not set)".into(),
                };
                let _ = writeln!(out, "  {:<16} {}{value}: {}", f.verdict.as_str(), f.annotation, f.detail);
            }
        }
        if let Some(settings) = &self.settings {
            let _ = writeln!(out, "ConfigMap {} (ingress-nginx's controller settings)", settings.configmap);
            if settings.findings.is_empty() {
                let _ = writeln!(out, "  no client-address settings");
            }
            for f in &settings.findings {
                let value = one_line(&f.value);
                let _ = writeln!(out, "  {:<16} {}={value}: {}", f.verdict.as_str(), f.key, f.detail);
            }
            if !settings.not_reviewed.is_empty() {
                let _ = writeln!(
                    out,
                    "  not reviewed yet: {} (the client-address, tracing and log-format settings are)",
                    settings.not_reviewed.join(", ")
                );
            }
            match settings.flags.is_empty() {
                true => {
                    let _ = writeln!(out, "  ramjet flags for these settings: none");
                }
                false => {
                    let _ = writeln!(out, "  ramjet flags for these settings: {}", settings.flags.join(" "));
                }
            }
        }
        let counted: Vec<String> = self.totals.iter().map(|(verdict, n)| format!("{n} {verdict}")).collect();
        let _ = writeln!(
            out,
            "{} Ingresses{}, {} findings{}{}",
            self.ingresses.len(),
            if self.settings.is_some() { " and a ConfigMap" } else { "" },
            self.totals.values().sum::<usize>(),
            if counted.is_empty() { "" } else { ": " },
            counted.join(", ")
        );
        let verdict = if self.is_clean() && self.settings.as_ref().is_some_and(|s| !s.flags.is_empty()) {
            "ramjet serves these Ingresses as ingress-nginx does, started with the flags above"
        } else if self.is_clean() {
            "ramjet serves these Ingresses as ingress-nginx does"
        } else {
            "not clean: ramjet would serve some of these Ingresses differently (see above)"
        };
        let _ = writeln!(out, "{verdict}");
        out
    }
}

/// A value on one line, shortened: snippets run to many lines.
fn one_line(value: &str) -> String {
    let flat = value.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(60) {
        Some((cut, _)) => format!("{:?}…", &flat[..cut]),
        None => format!("{flat:?}"),
    }
}
