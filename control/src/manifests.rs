//! The file source (`--manifests DIR`): Kubernetes objects read from YAML files instead of a
//! cluster, compiled by the same compiler.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file under the directory (recursively, in name order) is
//! read as one or more YAML documents. IngressClass, Ingress, Service, EndpointSlice, Secret,
//! ConfigMap and Namespace objects and the Gateway API's GatewayClass, Gateway, HTTPRoute,
//! GRPCRoute, TCPRoute, UDPRoute, TLSRoute, BackendTLSPolicy and ReferenceGrant (v1 or v1beta1) are
//! kept (a `kind: List` is opened). Any other object — another kind, or one of these in an `apiVersion` ramjet does not
//! read — is named in a warning and left out, so a directory of real application manifests works
//! as it is and nothing is dropped without a word. A document that is not valid YAML or not a valid
//! object of its kind becomes a diagnostic naming the file and the document; the rest still
//! compiles. Objects without a namespace are in `default`; a Secret's `stringData` is merged into
//! `data` as the API server would.
//!
//! [`watch`] re-reads the directory on an interval and submits a new snapshot when any file's bytes
//! changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::ByteString;
use ramjet_shared::{Diagnostic, ObjectRef, Severity};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::compile::snapshot::{ClusterSnapshot, IngressOptions};
use crate::gateway_api::{
    BackendTlsPolicy, Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant, TcpRoute, TlsRoute, UdpRoute,
};

/// The kind diagnostics give a file, or a document in one, that holds no readable object.
pub const FILE: &str = "File";

/// Why a manifests directory could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The directory (or a file in it) could not be read.
    #[error("--manifests {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The files of a manifests directory, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFiles {
    files: Vec<(PathBuf, Vec<u8>)>,
    digest: [u8; 32],
}

impl ManifestFiles {
    /// Reads every manifest file under `dir`.
    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        let mut paths = Vec::new();
        collect(dir, &mut paths)?;
        paths.sort();
        let mut hasher = Sha256::new();
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let bytes = std::fs::read(&path)
                .map_err(|source| ManifestError::Read { path: path.display().to_string(), source })?;
            hasher.update(path.as_os_str().as_encoded_bytes());
            hasher.update((bytes.len() as u64).to_be_bytes());
            hasher.update(&bytes);
            files.push((path, bytes));
        }
        Ok(ManifestFiles { files, digest: hasher.finalize().into() })
    }

    /// Parses the files into a snapshot.
    pub fn snapshot(&self, options: Arc<IngressOptions>) -> ClusterSnapshot {
        let mut snapshot = ClusterSnapshot { options, ..ClusterSnapshot::default() };
        for (path, bytes) in &self.files {
            let name = path.display().to_string();
            match std::str::from_utf8(bytes) {
                Ok(text) => parse(text, &name, &mut snapshot),
                Err(_) => snapshot.diagnostics.push(Diagnostic::new(
                    ObjectRef::new(FILE, None, name),
                    Severity::Error,
                    "the file is not UTF-8 text",
                )),
            }
        }
        snapshot
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    let read_error = |source| ManifestError::Read { path: dir.display().to_string(), source };
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads a manifests directory into a snapshot.
pub fn load(dir: &Path, options: Arc<IngressOptions>) -> Result<ClusterSnapshot, ManifestError> {
    Ok(ManifestFiles::read(dir)?.snapshot(options))
}

/// Adds the objects in `text` (one or more YAML documents) to `snapshot`; `file` names the origin in
/// diagnostics.
pub fn parse(text: &str, file: &str, snapshot: &mut ClusterSnapshot) {
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let at = format!("{file} (document {})", i + 1);
        match serde_yaml_ng::Value::deserialize(document) {
            Ok(serde_yaml_ng::Value::Null) => {}
            Ok(value) => add(value, &at, snapshot),
            Err(e) => {
                snapshot.diagnostics.push(Diagnostic::new(
                    ObjectRef::new(FILE, None, at),
                    Severity::Error,
                    format!("not valid YAML: {e}"),
                ));
                // The YAML stream cannot be resumed after a syntax error.
                return;
            }
        }
    }
}

fn add(value: serde_yaml_ng::Value, at: &str, snapshot: &mut ClusterSnapshot) {
    let field = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "List") => {
            if let Some(serde_yaml_ng::Value::Sequence(items)) = value.get("items").cloned() {
                for (i, item) in items.into_iter().enumerate() {
                    add(item, &format!("{at} items[{i}]"), snapshot);
                }
            }
        }
        ("networking.k8s.io/v1", "IngressClass") => {
            if let Some(o) = typed::<IngressClass>(value, at, snapshot) {
                snapshot.ingress_classes.push(Arc::new(o));
            }
        }
        ("networking.k8s.io/v1", "Ingress") => {
            if let Some(o) = namespaced::<Ingress>(value, at, snapshot) {
                snapshot.ingresses.push(Arc::new(o));
            }
        }
        ("v1", "Service") => {
            if let Some(o) = namespaced::<Service>(value, at, snapshot) {
                snapshot.services.push(Arc::new(o));
            }
        }
        ("discovery.k8s.io/v1", "EndpointSlice") => {
            if let Some(o) = namespaced::<EndpointSlice>(value, at, snapshot) {
                snapshot.endpoint_slices.push(Arc::new(o));
            }
        }
        ("v1", "Namespace") => {
            if let Some(o) = typed::<Namespace>(value, at, snapshot) {
                snapshot.namespaces.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1beta1", "GatewayClass") => {
            if let Some(o) = typed::<GatewayClass>(value, at, snapshot) {
                snapshot.gateway_classes.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1beta1", "Gateway") => {
            if let Some(o) = namespaced::<Gateway>(value, at, snapshot) {
                snapshot.gateways.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1beta1", "HTTPRoute") => {
            if let Some(o) = namespaced::<HttpRoute>(value, at, snapshot) {
                snapshot.http_routes.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1", "GRPCRoute") => {
            if let Some(o) = namespaced::<GrpcRoute>(value, at, snapshot) {
                snapshot.grpc_routes.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1beta1", "ReferenceGrant") => {
            if let Some(o) = namespaced::<ReferenceGrant>(value, at, snapshot) {
                snapshot.reference_grants.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1alpha2", "TCPRoute") => {
            if let Some(o) = namespaced::<TcpRoute>(value, at, snapshot) {
                snapshot.tcp_routes.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1alpha2", "UDPRoute") => {
            if let Some(o) = namespaced::<UdpRoute>(value, at, snapshot) {
                snapshot.udp_routes.push(Arc::new(o));
            }
        }
        (
            "gateway.networking.k8s.io/v1"
            | "gateway.networking.k8s.io/v1alpha3"
            | "gateway.networking.k8s.io/v1alpha2",
            "TLSRoute",
        ) => {
            if let Some(o) = namespaced::<TlsRoute>(value, at, snapshot) {
                snapshot.tls_routes.push(Arc::new(o));
            }
        }
        ("gateway.networking.k8s.io/v1", "BackendTLSPolicy") => {
            if let Some(o) = namespaced::<BackendTlsPolicy>(value, at, snapshot) {
                snapshot.backend_tls_policies.push(Arc::new(o));
            }
        }
        ("v1", "ConfigMap") => {
            if let Some(o) = namespaced::<ConfigMap>(value, at, snapshot) {
                snapshot.config_maps.push(Arc::new(o));
            }
        }
        ("v1", "Secret") => {
            if let Some(mut o) = namespaced::<Secret>(value, at, snapshot) {
                if let Some(strings) = o.string_data.take() {
                    let data = o.data.get_or_insert_with(BTreeMap::new);
                    for (k, v) in strings {
                        data.insert(k, ByteString(v.into_bytes()));
                    }
                }
                snapshot.secrets.push(Arc::new(o));
            }
        }
        _ => not_read(&value, &api_version, &kind, at, snapshot),
    }
}

/// The kinds ramjet reads, with the `apiVersion`s it reads them in.
const READ: &[(&str, &str)] = &[
    ("IngressClass", "networking.k8s.io/v1"),
    ("Ingress", "networking.k8s.io/v1"),
    ("Service", "v1"),
    ("EndpointSlice", "discovery.k8s.io/v1"),
    ("Namespace", "v1"),
    ("Secret", "v1"),
    ("ConfigMap", "v1"),
    ("GatewayClass", "gateway.networking.k8s.io/v1 or v1beta1"),
    ("Gateway", "gateway.networking.k8s.io/v1 or v1beta1"),
    ("HTTPRoute", "gateway.networking.k8s.io/v1 or v1beta1"),
    ("GRPCRoute", "gateway.networking.k8s.io/v1"),
    ("ReferenceGrant", "gateway.networking.k8s.io/v1 or v1beta1"),
    ("TCPRoute", "gateway.networking.k8s.io/v1 or v1alpha2"),
    ("TLSRoute", "gateway.networking.k8s.io/v1, v1alpha3 or v1alpha2"),
    ("UDPRoute", "gateway.networking.k8s.io/v1 or v1alpha2"),
    ("BackendTLSPolicy", "gateway.networking.k8s.io/v1"),
];

/// An object ramjet does not read is named, never dropped in silence. One of a kind it reads, in
/// an `apiVersion` it does not (an old `extensions/v1beta1` Ingress), is a warning: its author
/// expects it served. One of a kind it does not serve (a Deployment beside the Ingresses) is a
/// note ([`ClusterSnapshot::not_read`]): logged and listed by `--check`, not a problem.
fn not_read(value: &serde_yaml_ng::Value, api_version: &str, kind: &str, at: &str, snapshot: &mut ClusterSnapshot) {
    let metadata = |field: &str| value.get("metadata").and_then(|m| m.get(field)).and_then(|n| n.as_str());
    let object = ObjectRef::new(kind, metadata("namespace"), metadata("name").unwrap_or("")).in_file(at);
    match READ.iter().find(|(k, _)| *k == kind) {
        Some((_, versions)) => {
            let message = format!("{kind} in {api_version:?} is not read: ramjet reads it in {versions}");
            snapshot.diagnostics.push(Diagnostic::new(object, Severity::Warning, message));
        }
        None if kind.is_empty() => {
            let message = "a document without a kind is not an object ramjet can read";
            snapshot.diagnostics.push(Diagnostic::new(object, Severity::Warning, message));
        }
        None => snapshot.not_read.push(Diagnostic::new(
            object,
            Severity::Warning,
            format!("{kind} ({api_version}) is not a kind ramjet reads; it is left out"),
        )),
    }
}

/// A namespaced object; without a namespace in the file it lives in `default`, as kubectl would put it.
fn namespaced<T>(value: serde_yaml_ng::Value, at: &str, snapshot: &mut ClusterSnapshot) -> Option<T>
where
    T: DeserializeOwned + kube::Resource,
{
    let mut o = typed::<T>(value, at, snapshot)?;
    o.meta_mut().namespace.get_or_insert_with(|| "default".into());
    Some(o)
}

fn typed<T: DeserializeOwned>(value: serde_yaml_ng::Value, at: &str, snapshot: &mut ClusterSnapshot) -> Option<T> {
    let metadata = |field: &str| value.get("metadata").and_then(|m| m.get(field)).and_then(|n| n.as_str());
    let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("").to_string();
    let object = ObjectRef::new(&kind, metadata("namespace"), metadata("name").unwrap_or("")).in_file(at);
    match serde_yaml_ng::from_value(value) {
        Ok(o) => Some(o),
        Err(e) => {
            let message = format!("not a valid {kind}: {e}");
            snapshot.diagnostics.push(Diagnostic::new(object, Severity::Error, message));
            None
        }
    }
}

/// Re-reads `dir` every `interval` and calls `submit` with a new snapshot whenever a file changed
/// (the first read included). A directory that cannot be read is logged and tried again.
///
/// Reading and parsing run on tokio's blocking pool, not on the task's own thread: a large
/// directory takes seconds to parse, and the control thread also serves the admin API.
pub async fn watch(
    dir: PathBuf,
    options: Arc<IngressOptions>,
    interval: Duration,
    submit: impl Fn(ClusterSnapshot) + Send + 'static,
) {
    let dir = Arc::new(dir);
    let mut last: Option<[u8; 32]> = None;
    let mut failing = false;
    loop {
        let (reading, options) = (dir.clone(), options.clone());
        let read = tokio::task::spawn_blocking(move || {
            let files = ManifestFiles::read(&reading)?;
            let snapshot = (last != Some(files.digest)).then(|| files.snapshot(options));
            Ok::<_, ManifestError>((files.digest, files.len(), snapshot))
        })
        .await;
        match read {
            Ok(Ok((digest, files, snapshot))) => {
                failing = false;
                last = Some(digest);
                if let Some(snapshot) = snapshot {
                    tracing::info!(dir = %dir.display(), files, not_read = snapshot.not_read.len(), "manifests read");
                    for note in &snapshot.not_read {
                        tracing::info!(object = %note.object, "{}", note.message);
                    }
                    submit(snapshot);
                }
            }
            Ok(Err(e)) if !failing => {
                failing = true;
                tracing::warn!("{e}; trying again");
            }
            Ok(Err(_)) => {}
            Err(e) => tracing::error!(dir = %dir.display(), error = %e, "reading the manifests failed; trying again"),
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kinds_lists_and_defaults_and_reports_bad_documents() {
        let text = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata: { name: web }
    spec: { ports: [{ port: 80 }] }
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: ignored }
---
apiVersion: v1
kind: Secret
metadata: { name: s, namespace: team }
type: kubernetes.io/tls
stringData: { tls.crt: "x", tls.key: "y" }
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: { name: broken }
spec: { rules: "not a list" }
---
apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata: { name: old, namespace: team }
"#;
        let mut snapshot = ClusterSnapshot::default();
        parse(text, "m.yaml", &mut snapshot);
        assert_eq!(snapshot.services.len(), 1);
        assert_eq!(snapshot.services[0].metadata.namespace.as_deref(), Some("default"));
        assert_eq!(snapshot.secrets[0].data.as_ref().unwrap()["tls.crt"].0, b"x");
        assert!(snapshot.ingresses.is_empty());
        // What is not read is named, never dropped in silence.
        let said: Vec<(String, Severity, &str)> =
            snapshot.diagnostics.iter().map(|d| (d.object.to_string(), d.severity, d.message.as_str())).collect();
        assert_eq!(said.len(), 2, "{said:#?}");
        assert_eq!(said[1].0, "m.yaml (document 5): Ingress team/old");
        assert_eq!(
            (said[1].1, said[1].2),
            (
                Severity::Warning,
                "Ingress in \"networking.k8s.io/v1beta1\" is not read: ramjet reads it in networking.k8s.io/v1"
            )
        );
        // A kind ramjet does not serve is a note, not a problem.
        let note = &snapshot.not_read[..];
        assert_eq!(note.len(), 1, "{note:#?}");
        assert_eq!(note[0].object.to_string(), "m.yaml (document 2): Deployment ignored");
        assert_eq!(note[0].message, "Deployment (apps/v1) is not a kind ramjet reads; it is left out");
        let d = &snapshot.diagnostics[0];
        assert_eq!(d.object.to_string(), "m.yaml (document 4): Ingress broken");
        assert_eq!((d.object.kind.as_str(), d.object.name.as_str()), ("Ingress", "broken"));
        assert_eq!(d.object.file.as_deref(), Some("m.yaml (document 4)"));
        assert_eq!(d.severity, Severity::Error);
        assert!(d.message.starts_with("not a valid Ingress"), "{d:?}");
    }

    #[test]
    fn invalid_yaml_is_a_diagnostic() {
        let mut snapshot = ClusterSnapshot::default();
        parse("kind: [unclosed", "bad.yaml", &mut snapshot);
        assert_eq!(snapshot.diagnostics.len(), 1);
        assert!(snapshot.diagnostics[0].message.starts_with("not valid YAML"));
        assert_eq!(snapshot.diagnostics[0].object.to_string(), "File bad.yaml (document 1)");
    }
}
