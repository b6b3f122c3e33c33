//! A generation: one compiled, numbered, immutable configuration.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use crate::cert::{CertId, Certificate};
use crate::route::RouteTable;

/// SHA-256 over a compiled table.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The first 12 hex digits.
    pub fn short(&self) -> String {
        self.0[..6].iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

/// A problem found while compiling: the object it is about and what is wrong. The rest of the
/// configuration compiled without it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Diagnostic {
    /// `kind namespace/name` or a file location.
    pub object: String,
    pub message: String,
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
    pub digest: crate::generation::Digest,
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
