//! `ramjet migration-report`: what ramjet would do with each annotation of a cluster's Ingresses,
//! before anyone switches from ingress-nginx.
//!
//! Ingresses come from the API server ([`crate::cluster::list_snapshot`]) or a manifests
//! directory; each is judged by the same registry the compiler uses
//! ([`crate::compile::annotations::review`]), so the report says exactly what the compiler will
//! warn about, refuse or leave out. With `--nginx-configmap`, ingress-nginx's controller ConfigMap
//! is judged too ([`configmap`]): the settings it knows and the daemon flags that keep them.
//!
//! With the objects the Ingresses refer to (a `--manifests` directory, or listed from the cluster),
//! each Ingress is also compiled as ramjet would serve it once it takes over the class
//! ([`Report::with_compile`]), so its outcome — served, partly, not served — says what its Services,
//! ports and Secrets allow, not only its annotations. Rendered as text for people, Markdown for a
//! pull-request comment, or JSON ([`SCHEMA_VERSION`], documented in docs/migration-report.md) for
//! scripts; [`Report::fails`] is the exit status a CI gates on.

pub mod configmap;
pub mod controller_flags;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass, IngressClassSpec};
use ramjet_shared::Severity;

use crate::compile::annotations::{review, Finding, Verdict};
use crate::compile::ingress::LEGACY_CLASS_ANNOTATION;
use crate::compile::snapshot::{ClusterSnapshot, IngressOptions};
use crate::compile::{cluster, Compiler};
use crate::config_file::ControllerConfig;
use configmap::SettingsReport;
use controller_flags::FlagsReport;

/// The version of the JSON report's shape; raised when a field changes meaning or goes away
/// (fields may be added within a version).
pub const SCHEMA_VERSION: u32 = 1;

/// How an Ingress would be served by ramjet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// As under ingress-nginx (approximations included).
    Served,
    /// Served, but some of what it asks for is refused, ignored or unknown, or its compile
    /// reported a problem (a path, a certificate left out).
    Partly,
    /// Not served at all.
    NotServed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Served => "served",
            Outcome::Partly => "partly",
            Outcome::NotServed => "not-served",
        }
    }
}

/// A problem the compiler reported for an Ingress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CompileNote {
    /// `error` (the Ingress is not served) or `warning` (part of it is not).
    pub severity: &'static str,
    pub message: String,
}

/// One Ingress and what ramjet makes of it.
#[derive(Debug, serde::Serialize)]
pub struct IngressReport {
    pub namespace: String,
    pub name: String,
    /// `spec.ingressClassName`, else the legacy class annotation.
    pub class: Option<String>,
    pub outcome: Outcome,
    pub findings: Vec<Finding>,
    /// What the compiler said of it, when the report compiled the Ingresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<Vec<CompileNote>>,
}

/// What `--fail-on` can name: a verdict of a finding, or an Ingress's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    Verdict(Verdict),
    Outcome(Outcome),
}

impl std::str::FromStr for FailOn {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let verdicts =
            [Verdict::Approximated, Verdict::Refused, Verdict::Ignored, Verdict::RefusedToServe, Verdict::Unknown];
        if let Some(v) = verdicts.into_iter().find(|v| v.as_str() == s) {
            return Ok(FailOn::Verdict(v));
        }
        match s {
            "not-served" => Ok(FailOn::Outcome(Outcome::NotServed)),
            "partly" => Ok(FailOn::Outcome(Outcome::Partly)),
            _ => Err(format!(
                "`{s}` is not one of approximated, refused, ignored, refused-to-serve, unknown, partly, not-served"
            )),
        }
    }
}

/// The whole report, Ingresses in namespace/name order.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub schema_version: u32,
    /// Whether each Ingress was compiled (else its outcome comes from its annotations alone).
    pub compiled: bool,
    pub ingresses: Vec<IngressReport>,
    /// ingress-nginx's controller ConfigMap, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsReport>,
    /// ingress-nginx's controller flags, when its Deployment (or DaemonSet) was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<FlagsReport>,
    /// Findings per verdict.
    pub totals: BTreeMap<Verdict, usize>,
}

impl Report {
    /// Judges the Ingresses of `class` (all of them when `None`), as they come from ingress-nginx.
    /// `redirects_by_default`: ramjet will run with a controller configuration whose `ssl-redirect`
    /// is on, so a TLS Ingress that does not set it is redirected as under ingress-nginx.
    pub fn new(ingresses: &[Ingress], class: Option<&str>, redirects_by_default: bool) -> Report {
        let mut reports: Vec<IngressReport> = ingresses
            .iter()
            .map(|ingress| {
                let m = &ingress.metadata;
                let spec = ingress.spec.as_ref();
                let legacy = m.annotations.as_ref().and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
                let has_tls = spec.and_then(|s| s.tls.as_ref()).is_some_and(|tls| !tls.is_empty());
                let findings = review(m.annotations.as_ref(), has_tls, !redirects_by_default);
                IngressReport {
                    namespace: m.namespace.clone().unwrap_or_else(|| "default".into()),
                    name: m.name.clone().unwrap_or_default(),
                    class: spec.and_then(|s| s.ingress_class_name.clone()).or_else(|| legacy.cloned()),
                    outcome: outcome_of(&findings),
                    findings,
                    compile: None,
                }
            })
            .filter(|r| class.is_none() || r.class.as_deref() == class)
            .collect();
        reports.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut totals = BTreeMap::new();
        for finding in reports.iter().flat_map(|r| &r.findings) {
            *totals.entry(finding.verdict).or_insert(0) += 1;
        }
        Report {
            schema_version: SCHEMA_VERSION,
            compiled: false,
            ingresses: reports,
            settings: None,
            controller: None,
            totals,
        }
    }

    /// Compiles the reported Ingresses with the objects of `snapshot` (Services, EndpointSlices,
    /// Secrets), as ramjet would serve them once it takes over their class, and adds what the
    /// compiler said of each to its outcome.
    /// `config`: the controller configuration ramjet would run with (ingress-nginx's ConfigMap).
    /// Names outside the cluster the Ingresses need (auth-url hosts, ExternalName Services, mirror
    /// targets) are looked up with `resolve`, then compiled with their answers, as the daemon does.
    pub fn with_compile(
        mut self,
        snapshot: &ClusterSnapshot,
        config: ControllerConfig,
        resolve: impl FnOnce(&std::collections::BTreeSet<String>) -> crate::dns::DnsAnswers,
    ) -> Report {
        const CLASS: &str = "ramjet-migration-report";
        let reported: std::collections::HashSet<(&str, &str)> =
            self.ingresses.iter().map(|r| (r.namespace.as_str(), r.name.as_str())).collect();
        // Every reported Ingress, and only those, in a class of its own that ramjet serves.
        let ingresses = snapshot
            .ingresses
            .iter()
            .filter(|i| {
                let m = &i.metadata;
                reported.contains(&(m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or("")))
            })
            .map(|i| {
                let mut i = (**i).clone();
                i.spec.get_or_insert_with(Default::default).ingress_class_name = Some(CLASS.into());
                Arc::new(i)
            })
            .collect();
        let options = IngressOptions {
            ingress_class: CLASS.into(),
            controller_name: "ramjet.dev/migration-report".into(),
            ..(*snapshot.options).clone()
        };
        let class = IngressClass {
            metadata: kube::api::ObjectMeta { name: Some(CLASS.into()), ..Default::default() },
            spec: Some(IngressClassSpec { controller: Some(options.controller_name.clone()), ..Default::default() }),
        };
        let snapshot = ClusterSnapshot {
            options: Arc::new(options),
            ingress_classes: vec![Arc::new(class)],
            ingresses,
            gateways: Vec::new(),
            http_routes: Vec::new(),
            grpc_routes: Vec::new(),
            diagnostics: Vec::new(),
            ..snapshot.clone()
        };
        let mut compiler = Compiler::new();
        compiler.config = Arc::new(config);
        let mut draft = cluster::compile(&snapshot, &mut compiler);
        if !draft.dns_names.is_empty() {
            compiler.dns = Arc::new(resolve(&draft.dns_names));
            draft = cluster::compile(&snapshot, &mut compiler);
        }
        let mut notes: BTreeMap<String, Vec<CompileNote>> = BTreeMap::new();
        for d in &draft.diagnostics {
            let severity = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            notes.entry(d.object.to_string()).or_default().push(CompileNote { severity, message: d.message.clone() });
        }
        for ingress in &mut self.ingresses {
            let notes = notes.remove(&format!("Ingress {}/{}", ingress.namespace, ingress.name)).unwrap_or_default();
            let compiled = if notes.iter().any(|n| n.severity == "error") {
                Outcome::NotServed
            } else if notes.is_empty() {
                Outcome::Served
            } else {
                Outcome::Partly
            };
            ingress.outcome = ingress.outcome.max(compiled);
            ingress.compile = Some(notes);
        }
        self.compiled = true;
        self
    }

    /// Whether the report fails a CI that gates on `fail_on` (`None`: on anything that would not
    /// behave as under ingress-nginx, the report's default).
    pub fn fails(&self, fail_on: Option<&[FailOn]>) -> bool {
        let Some(fail_on) = fail_on else {
            return !self.is_clean() || self.ingresses.iter().any(|i| i.outcome != Outcome::Served);
        };
        let verdicts = self.ingresses.iter().flat_map(|i| &i.findings).map(|f| f.verdict);
        let verdicts = verdicts.chain(self.settings.iter().flat_map(|s| &s.findings).map(|f| f.verdict));
        let verdicts = verdicts.chain(self.controller.iter().flat_map(|c| &c.findings).map(|f| f.verdict));
        let outcomes = self.ingresses.iter().map(|i| i.outcome);
        verdicts.map(FailOn::Verdict).chain(outcomes.map(FailOn::Outcome)).any(|x| fail_on.contains(&x))
    }

    /// Adds the review of ingress-nginx's controller flags.
    pub fn with_controller(mut self, flags: FlagsReport) -> Report {
        for finding in &flags.findings {
            *self.totals.entry(finding.verdict).or_insert(0) += 1;
        }
        self.controller = Some(flags);
        self
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
            let _ = writeln!(
                out,
                "Ingress {}/{} (class {class}): {}",
                ingress.namespace,
                ingress.name,
                ingress.outcome.as_str()
            );
            if ingress.findings.is_empty() {
                let _ = writeln!(out, "  no ingress-nginx or ramjet annotations");
            }
            for note in ingress.compile.iter().flatten() {
                let _ = writeln!(out, "  {:<16} {}", format!("compile {}", note.severity), note.message);
            }
            for f in &ingress.findings {
                let value = match &f.value {
                    Some(v) => format!("={}", one_line(v)),
                    None => " (not set)".into(),
                };
                let _ = writeln!(out, "  {:<16} {}{value}: {}", f.verdict.as_str(), f.annotation, f.detail);
            }
        }
        if let Some(flags) = &self.controller {
            let _ = writeln!(out, "{} (ingress-nginx's controller flags)", flags.controller);
            for f in &flags.findings {
                let _ = writeln!(out, "  {:<16} --{}={}: {}", f.verdict.as_str(), f.key, one_line(&f.value), f.detail);
            }
            if !flags.not_reviewed.is_empty() {
                let _ = writeln!(out, "  not reviewed yet: --{}", flags.not_reviewed.join(", --"));
            }
            let _ = writeln!(
                out,
                "  ramjet flags for these: {}",
                if flags.flags.is_empty() { "none".to_string() } else { flags.flags.join(" ") }
            );
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
                    "  not reviewed yet: {} (the keys --config reads, and the client-address, tracing and log-format settings are)",
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
            "{} Ingresses{}{}, {} findings{}{}",
            self.ingresses.len(),
            if self.controller.is_some() { ", the controller's flags" } else { "" },
            if self.settings.is_some() { " and a ConfigMap" } else { "" },
            self.totals.values().sum::<usize>(),
            if counted.is_empty() { "" } else { ": " },
            counted.join(", ")
        );
        let served = self.ingresses.iter().all(|i| i.outcome == Outcome::Served);
        let verdict = if !served {
            "not clean: some of these Ingresses would be served only partly or not at all (see above)"
        } else if self.is_clean()
            && (self.settings.as_ref().is_some_and(|s| !s.flags.is_empty())
                || self.controller.as_ref().is_some_and(|c| !c.flags.is_empty()))
        {
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

/// An Ingress's outcome by its annotations alone.
fn outcome_of(findings: &[Finding]) -> Outcome {
    if findings.iter().any(|f| f.verdict == Verdict::RefusedToServe) {
        Outcome::NotServed
    } else if findings.iter().all(|f| f.verdict.is_faithful()) {
        Outcome::Served
    } else {
        Outcome::Partly
    }
}

impl Report {
    /// For a pull-request comment: a table of the Ingresses and their outcomes, then each one's
    /// findings that are not honoured as they are.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "### ramjet migration report\n\n| Ingress | class | outcome | findings |\n|---|---|---|---|\n",
        );
        for i in &self.ingresses {
            let mut counts: BTreeMap<Verdict, usize> = BTreeMap::new();
            for f in &i.findings {
                *counts.entry(f.verdict).or_default() += 1;
            }
            let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
            let _ = writeln!(
                out,
                "| `{}/{}` | {} | **{}** | {} |",
                i.namespace,
                i.name,
                md(i.class.as_deref().unwrap_or("(none)")),
                i.outcome.as_str(),
                if counts.is_empty() { "none".to_string() } else { counts.join(", ") }
            );
        }
        for i in self
            .ingresses
            .iter()
            .filter(|i| i.outcome != Outcome::Served || i.findings.iter().any(|f| f.verdict != Verdict::Honoured))
        {
            let _ = writeln!(out, "\n#### `{}/{}`: {}\n", i.namespace, i.name, i.outcome.as_str());
            for f in i.findings.iter().filter(|f| f.verdict != Verdict::Honoured) {
                let value = f.value.as_deref().map(|v| format!("=`{}`", md(&one_line(v)))).unwrap_or_default();
                let _ = writeln!(out, "- **{}** `{}`{value}: {}", f.verdict, f.annotation, md(&f.detail));
            }
            for note in i.compile.iter().flatten() {
                let _ = writeln!(out, "- **compile {}**: {}", note.severity, md(&note.message));
            }
        }
        if let Some(flags) = &self.controller {
            let _ = writeln!(out, "\n#### {} (flags)\n", md(&flags.controller));
            for f in &flags.findings {
                let _ =
                    writeln!(out, "- **{}** `--{}`=`{}`: {}", f.verdict, f.key, md(&one_line(&f.value)), md(&f.detail));
            }
            if !flags.flags.is_empty() {
                let _ = writeln!(out, "\nramjet flags: `{}`", flags.flags.join(" "));
            }
        }
        if let Some(settings) = &self.settings {
            let _ = writeln!(out, "\n#### ConfigMap `{}`\n", settings.configmap);
            for f in &settings.findings {
                let _ =
                    writeln!(out, "- **{}** `{}`=`{}`: {}", f.verdict, f.key, md(&one_line(&f.value)), md(&f.detail));
            }
            if !settings.flags.is_empty() {
                let _ = writeln!(out, "\nramjet flags: `{}`", settings.flags.join(" "));
            }
        }
        let counted: Vec<String> = self.totals.iter().map(|(verdict, n)| format!("{n} {verdict}")).collect();
        let _ = writeln!(
            out,
            "\n{} Ingresses; {}",
            self.ingresses.len(),
            if counted.is_empty() { "no findings".to_string() } else { counted.join(", ") }
        );
        out
    }
}

/// The first object of one of `kinds` named `namespace/name` (no namespace: `default`) among the
/// YAML files of `dir` and its subdirectories, in file-name order.
pub fn find_object_in_dir(
    dir: &std::path::Path,
    kinds: &[&str],
    namespace: &str,
    name: &str,
) -> std::io::Result<Option<serde_yaml_ng::Value>> {
    let mut pending = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                files.push(path);
            }
        }
    }
    files.sort();
    for file in files {
        if let Some(found) = find_object_in_yaml(&std::fs::read_to_string(&file)?, kinds, namespace, name) {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// [`find_object_in_dir`] in one YAML text (documents, or a `List`'s items).
pub fn find_object_in_yaml(text: &str, kinds: &[&str], namespace: &str, name: &str) -> Option<serde_yaml_ng::Value> {
    use serde::Deserialize;
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let Ok(value) = serde_yaml_ng::Value::deserialize(document) else { return None };
        let items = match value.get("kind").and_then(|k| k.as_str()) {
            Some("List") => value.get("items").and_then(|i| i.as_sequence()).cloned().unwrap_or_default(),
            _ => vec![value],
        };
        for item in items {
            let field = |path: &[&str]| path.iter().try_fold(&item, |v, k| v.get(*k)).and_then(|v| v.as_str());
            let ours = field(&["kind"]).is_some_and(|k| kinds.contains(&k))
                && field(&["metadata", "name"]) == Some(name)
                && field(&["metadata", "namespace"]).unwrap_or("default") == namespace;
            if ours {
                return Some(item);
            }
        }
    }
    None
}

/// Text for a Markdown table cell or list item: pipes and backticks cannot end it early.
fn md(text: &str) -> String {
    text.replace('|', "\\|").replace('`', "'")
}

/// A value on one line, shortened: snippets run to many lines.
fn one_line(value: &str) -> String {
    let flat = value.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(60) {
        Some((cut, _)) => format!("{:?}…", &flat[..cut]),
        None => format!("{flat:?}"),
    }
}
