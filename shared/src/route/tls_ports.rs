//! TLS route ports: a Gateway TLS listener on a port of its own. A connection's ClientHello names
//! the server it wants; the port's entry for that name says whether the TLS session is passed to a
//! backend unopened (Passthrough) or ended here with the listener's certificate (Terminate), and
//! which weighted backends get the bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::{by_server_name, PortRoute};
use crate::cert::CertId;
use crate::normalize_host;

/// What one server name of a TLS port gets.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct TlsTarget {
    /// `Some`: the handshake is done here with this certificate and the plain bytes are relayed;
    /// `None`: the TLS session goes to the backend unopened.
    pub terminate: Option<CertId>,
    /// The weighted backends, and the route they come from.
    pub route: PortRoute,
}

impl TlsTarget {
    /// Passed through unopened to one backend (`ssl-passthrough`).
    pub fn passthrough(backend: Arc<super::Backend>, source: &str) -> Self {
        TlsTarget { terminate: None, route: PortRoute::new(vec![super::WeightedBackend::new(backend, 1)], source) }
    }
}

impl fmt::Display for TlsTarget {
    /// `terminated (certificate 3f2a…) to ns/app:3000 ×1 (from ns/route)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.terminate {
            Some(cert) => write!(f, "terminated (certificate {}) to {}", cert.short(), self.route),
            None => write!(f, "passed through to {}", self.route),
        }
    }
}

/// The server names of one TLS port, as declared: exact, `*.` or `**.` wildcard, `""` for any.
#[derive(Debug, Default)]
pub struct TlsPort {
    names: BTreeMap<Arc<str>, Arc<TlsTarget>>,
}

impl TlsPort {
    /// The target for a ClientHello's server name (`None`: it sent none): the exact name, then
    /// wildcards (one label, then any depth, longest suffix first), then the entry for any name.
    pub fn target(&self, server_name: Option<&str>) -> Option<&Arc<TlsTarget>> {
        let mut buf = [0u8; 256];
        match server_name.and_then(|name| normalize_host(name, &mut buf)) {
            Some(name) => by_server_name(&self.names, true, name),
            None => self.names.get(""),
        }
    }

    /// Every name with its target, sorted by name.
    pub fn names(&self) -> impl Iterator<Item = (&Arc<str>, &TlsTarget)> {
        self.names.iter().map(|(host, target)| (host, &**target))
    }

    /// The certificates this port's terminated names are served with.
    pub(crate) fn certificates(&self) -> impl Iterator<Item = CertId> + '_ {
        self.names.values().filter_map(|target| target.terminate)
    }

    /// Where the port's first name came from (the route holding it).
    pub(crate) fn any_source(&self) -> Option<Arc<str>> {
        self.names.values().next().map(|target| target.route.source.clone())
    }

    /// Adds a name; the first target for a name stays (`Err` names its route).
    pub(crate) fn add(&mut self, host: &str, target: TlsTarget) -> Result<(), Arc<str>> {
        let host: Arc<str> = host.to_ascii_lowercase().into();
        if let Some(held) = self.names.get(&host) {
            return Err(held.route.source.clone());
        }
        self.names.insert(host, Arc::new(target));
        Ok(())
    }
}
