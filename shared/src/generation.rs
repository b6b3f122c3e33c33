//! A generation: one compiled, numbered, immutable configuration.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use crate::cert::{CertId, Certificate};
use crate::digest::Digest;
use crate::route::RouteTable;

/// A problem found while compiling: the object it is about, how much of it is left out, and what is
/// wrong. The rest of the configuration compiled without it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    pub object: ObjectRef,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn new(object: ObjectRef, severity: Severity, message: impl Into<String>) -> Self {
        Diagnostic { object, severity, message: message.into() }
    }
}

/// How much of the object a diagnostic names is left out of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Part of the object is ignored (a path another Ingress holds, a TLS host given another
    /// certificate); the rest of it is served.
    Warning,
    /// The object is not served at all (an unknown Service or port, a missing Secret, a document
    /// that is not valid YAML).
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// The object a diagnostic is about: a Kubernetes object (`Ingress shop/web`), an entry of the
/// static routes file (`StaticRoutes routes[2]`), or a file that could not be read (`File
/// app.yaml`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    /// For namespaced Kubernetes objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Where it was read from, for objects read from files (`--manifests`): `app.yaml (document 2)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl ObjectRef {
    pub fn new(kind: impl Into<String>, namespace: Option<&str>, name: impl Into<String>) -> Self {
        ObjectRef { kind: kind.into(), namespace: namespace.map(String::from), name: name.into(), file: None }
    }

    /// An Ingress, by namespace and name.
    pub fn ingress(namespace: &str, name: &str) -> Self {
        Self::new("Ingress", Some(namespace), name)
    }

    /// The same object, read from `file`.
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
}

/// `Ingress shop/web`, `StaticRoutes routes[2]`, `app.yaml (document 2): Ingress shop/web`.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One compiled configuration. Never mutated after it is built: publishing, rolling back and
/// diffing all work on whole generations.
#[derive(Debug)]
pub struct Generation {
    /// Numbered by the compiler in compile order; 0 is the empty table before the first compile.
    pub number: u64,
    pub table: Arc<RouteTable>,
    /// The certificates the table names, parsed; the applier adds them to the store before the table
    /// is published.
    pub certificates: Vec<Arc<Certificate>>,
    pub digest: Digest,
    pub compiled_at: SystemTime,
    pub diagnostics: Arc<[Diagnostic]>,
}

impl Generation {
    /// Wraps a compiled table; the digest is the table's.
    pub fn new(
        number: u64,
        table: RouteTable,
        certificates: Vec<Arc<Certificate>>,
        diagnostics: Vec<Diagnostic>,
    ) -> Self {
        let digest = table.digest();
        Generation {
            number,
            table: Arc::new(table),
            certificates,
            digest,
            compiled_at: SystemTime::now(),
            diagnostics: diagnostics.into(),
        }
    }

    /// The empty configuration every process starts from (answers 404 to everything).
    pub fn empty() -> Self {
        Self::new(0, RouteTable::default(), Vec::new(), Vec::new())
    }

    pub fn cert_ids(&self) -> Vec<CertId> {
        self.table.cert_ids()
    }
}
