//! The compiler's shared half: numbering, digests, structural sharing, backend slots and the
//! certificate cache. Each source turns its input into a [`Draft`] with the helpers here — a
//! routes file through [`static_routes::compile`], Kubernetes objects through
//! [`cluster::compile`] (the one entry point: Ingresses, then the Gateway API, into one draft that
//! also carries the Gateway API status it implies) — and [`Compiler::finish`] turns a draft into a
//! [`Generation`], or into nothing when the compiled table is the one compiled last (a fixed point:
//! re-applying the same input changes nothing).
//!
//! The modules, from the top floor down (each imports only modules below it, none in a circle):
//!
//! ```text
//! cluster                     the entry point for Kubernetes objects: ingress, then gateway
//! ingress/  gateway/          Ingresses (read with annotations::values); Gateway API objects
//! resolve   static_routes     Services, endpoints, Secrets by name, for one compile; a routes file
//! (this module)               Draft, Compiler
//! annotations/ snapshot status  the annotation table and value parsers; the objects compiled and
//!                             the options; what Gateway API status says about each object
//! ```

pub mod annotations;
pub mod cluster;
pub mod gateway;
pub mod ingress;
pub mod resolve;
pub mod snapshot;
pub mod static_routes;
pub mod status;

use std::collections::HashMap;
use std::sync::Arc;

use crate::config_file::ControllerConfig;
use ramjet_shared::{
    Backend, BackendKind, BackendProtocol, CaBundle, CertId, Certificate, ClientAuth, Diagnostic, Digest, Generation,
    ObjectRef, RouteTable, Severity, SubjectAltName, TableBuilder, UpstreamTls, UpstreamTlsSpec,
};

/// A table being compiled, with the certificates it names and what went wrong on the way.
#[derive(Default)]
pub struct Draft {
    pub builder: TableBuilder,
    pub certificates: Vec<Arc<Certificate>>,
    pub diagnostics: Vec<Diagnostic>,
    /// The canaries that auto-promote, for the replica that decides.
    pub canaries: Vec<crate::canary::promotion::CanaryPlan>,
    /// What Gateway API status says about the objects compiled (empty for a routes file): the
    /// status of this table, taken from the same compile.
    pub gateway_status: status::Report,
    /// Names outside the cluster this table needs resolved ([`crate::dns`]): kept fresh while a
    /// compile asks for them.
    pub dns_names: std::collections::BTreeSet<String>,
}

impl Draft {
    /// Part of `object` is ignored; the rest of it is served.
    pub fn warn(&mut self, object: &ObjectRef, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(object.clone(), Severity::Warning, message));
    }

    /// `object` is left out of the table.
    pub fn reject(&mut self, object: &ObjectRef, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(object.clone(), Severity::Error, message));
    }
}

/// The settings an [`UpstreamTls`] is built from: CA bundle id, server name, SNI, client
/// certificate.
type TlsKey = (Option<[u8; 32]>, String, bool, Option<CertId>, Vec<SubjectAltName>);

/// State that lives across compiles.
#[derive(Default)]
pub struct Compiler {
    last_number: u64,
    last_digest: Option<Digest>,
    previous: Option<Arc<RouteTable>>,
    /// Each backend name's round-robin slot; slots of names that leave are reused, so a worker's
    /// cursor table stays as long as the largest number of backends at once.
    slots: HashMap<Arc<str>, u32>,
    free_slots: Vec<u32>,
    backends: HashMap<Arc<str>, Arc<Backend>>,
    used_backends: HashMap<Arc<str>, Arc<Backend>>,
    certificates: HashMap<CertId, Arc<Certificate>>,
    /// CA bundles by content id and upstream TLS settings by their spec, built once across
    /// compiles (the `used_` maps: those of the compile under way; the others are forgotten).
    ca_bundles: HashMap<[u8; 32], Arc<CaBundle>>,
    used_ca_bundles: HashMap<[u8; 32], Arc<CaBundle>>,
    upstream_tls: HashMap<TlsKey, Arc<UpstreamTls>>,
    used_upstream_tls: HashMap<TlsKey, Arc<UpstreamTls>>,
    /// Client-certificate authentications by content: an unchanged one stays the same value, so
    /// the workers' connections need not compare it again.
    client_auths: HashMap<Digest, Arc<ClientAuth>>,
    used_client_auths: HashMap<Digest, Arc<ClientAuth>>,
    /// The controller configuration (`--config`) the next compiles apply.
    pub config: Arc<ControllerConfig>,
    /// What names outside the cluster resolve to ([`crate::dns`]).
    pub dns: Arc<crate::dns::DnsAnswers>,
    /// Compiles that produced a new generation, and compiles in all.
    pub compiled: u64,
    pub compiles: u64,
}

impl Compiler {
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend for this compile; the same name and content as last time gives the same `Arc`, so
    /// unchanged routes keep sharing it.
    pub fn backend(&mut self, name: &str, kind: BackendKind) -> Arc<Backend> {
        self.backend_with(name, kind, BackendProtocol::Http1)
    }

    /// [`Compiler::backend`] for endpoints that speak `protocol`.
    pub fn backend_with(&mut self, name: &str, kind: BackendKind, protocol: BackendProtocol) -> Arc<Backend> {
        self.backend_over(name, kind, protocol, None)
    }

    /// [`Compiler::backend_with`], over TLS with `tls` (for `HTTPS` and `GRPCS`).
    pub fn backend_over(
        &mut self,
        name: &str,
        kind: BackendKind,
        protocol: BackendProtocol,
        tls: Option<Arc<UpstreamTls>>,
    ) -> Arc<Backend> {
        if let Some(b) = self.used_backends.get(name) {
            if b.kind == kind && b.protocol == protocol && b.tls == tls {
                return b.clone();
            }
        }
        let slot = match self.slots.get(name) {
            Some(slot) => *slot,
            None => {
                let slot = self.free_slots.pop().unwrap_or(self.slots.len() as u32);
                self.slots.insert(name.into(), slot);
                slot
            }
        };
        let candidate = Backend::with_tls(name, slot, kind, protocol, tls);
        let backend = match self.backends.get(name) {
            Some(prev) if **prev == candidate => prev.clone(),
            _ => Arc::new(candidate),
        };
        self.used_backends.insert(backend.name.clone(), backend.clone());
        backend
    }

    /// `backend` (compiled in this compile) speaking `protocol` instead, over TLS with `tls`.
    pub fn speaking(
        &mut self,
        backend: &Arc<Backend>,
        protocol: BackendProtocol,
        tls: Option<Arc<UpstreamTls>>,
    ) -> Arc<Backend> {
        let kind = match &backend.kind {
            BackendKind::Endpoints(addrs) => BackendKind::Endpoints(addrs.clone()),
            BackendKind::Respond(_) => return backend.clone(),
        };
        self.backend_over(&backend.name, kind, protocol, tls)
    }

    /// The CA bundle in `pem` (from `source`), parsed once per content across compiles.
    pub fn ca_bundle(&mut self, pem: &[u8], source: &str) -> Result<Arc<CaBundle>, String> {
        let id = CaBundle::id_of(pem);
        let known = self.used_ca_bundles.get(&id).or_else(|| self.ca_bundles.get(&id)).cloned();
        let bundle = match known {
            Some(bundle) => bundle,
            None => crate::certs::parse_ca_bundle(pem, source)?,
        };
        self.used_ca_bundles.insert(id, bundle.clone());
        Ok(bundle)
    }

    /// The upstream TLS for `spec`, built once per settings across compiles (so that unchanged
    /// backends stay the same value and keep their pooled connections).
    pub fn upstream_tls(&mut self, spec: &UpstreamTlsSpec) -> Result<Arc<UpstreamTls>, String> {
        let key = (
            spec.verify.as_ref().map(|b| b.id),
            spec.server_name.clone(),
            spec.sni,
            spec.client_cert.as_ref().map(|c| c.id),
            spec.subject_alt_names.clone(),
        );
        let known = self.used_upstream_tls.get(&key).or_else(|| self.upstream_tls.get(&key)).cloned();
        let tls = match known {
            Some(tls) => tls,
            None => UpstreamTls::new(spec)?,
        };
        self.used_upstream_tls.insert(key, tls.clone());
        Ok(tls)
    }

    /// `auth`, or the equal one of the last compile.
    pub fn client_auth(&mut self, auth: ClientAuth) -> Arc<ClientAuth> {
        let key = ramjet_shared::digest_of(&auth);
        let known = self.used_client_auths.get(&key).or_else(|| self.client_auths.get(&key)).cloned();
        let auth = known.unwrap_or_else(|| Arc::new(auth));
        self.used_client_auths.insert(key, auth.clone());
        auth
    }

    /// The parsed certificate for `cert`'s content, parsed once across compiles.
    pub fn certificate(&mut self, cert: &Arc<Certificate>) -> Arc<Certificate> {
        self.certificates.entry(cert.id).or_insert_with(|| cert.clone()).clone()
    }

    /// A parsed certificate already known by id (no parsing needed).
    pub fn known_certificate(&self, id: &CertId) -> Option<Arc<Certificate>> {
        self.certificates.get(id).cloned()
    }

    /// Builds the table and numbers it, unless it equals the last compiled table.
    pub fn finish(&mut self, draft: Draft) -> Option<Generation> {
        self.compiles += 1;
        let mut draft = draft;
        let mut builder = std::mem::take(&mut draft.builder);
        builder.set_hsts(self.config.hsts_value());
        builder.set_no_tls_redirect(&self.config.no_tls_redirect_locations);
        builder.set_unlogged_unmatched(!self.config.log_unmatched);
        let (table, regex_problems) = builder.build_checked(self.previous.as_deref());
        for problem in regex_problems {
            for source in &problem.sources {
                let (namespace, name) = source.split_once('/').unwrap_or(("", source));
                let host = if problem.host.is_empty() { "*" } else { &problem.host };
                draft.warn(
                    &ObjectRef::ingress(namespace, name),
                    format!("{}; the regex paths of {host} are not served", problem.message),
                );
            }
        }
        // Backends not used by this compile are forgotten, and their slots freed for new names.
        self.backends = std::mem::take(&mut self.used_backends);
        self.ca_bundles = std::mem::take(&mut self.used_ca_bundles);
        self.upstream_tls = std::mem::take(&mut self.used_upstream_tls);
        self.client_auths = std::mem::take(&mut self.used_client_auths);
        let (backends, free) = (&self.backends, &mut self.free_slots);
        self.slots.retain(|name, slot| {
            let used = backends.contains_key(name);
            if !used {
                free.push(*slot);
            }
            used
        });
        // Lowest first, so the slots in use stay dense.
        free.sort_unstable_by(|a, b| b.cmp(a));
        let ids = table.cert_ids();
        self.certificates.retain(|id, _| ids.contains(id));
        if self.last_digest == Some(table.digest()) {
            return None;
        }
        self.last_number += 1;
        self.compiled += 1;
        self.last_digest = Some(table.digest());
        let mut certificates: Vec<Arc<Certificate>> =
            draft.certificates.into_iter().filter(|c| ids.contains(&c.id)).collect();
        certificates.sort_by_key(|c| c.id);
        certificates.dedup_by_key(|c| c.id);
        let mut diagnostics = draft.diagnostics;
        diagnostics.sort();
        diagnostics.dedup();
        let generation = Generation::new(self.last_number, table, certificates, diagnostics);
        self.previous = Some(generation.table.clone());
        Some(generation)
    }
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    fn endpoints() -> BackendKind {
        BackendKind::Endpoints(vec!["127.0.0.1:1".parse().unwrap()].into_boxed_slice())
    }

    #[test]
    fn slots_of_departed_backends_are_reused() {
        let mut compiler = Compiler::new();
        let mut max_slot = 0;
        // A thousand compiles, each with three backends of new names: the slots stay below six (the
        // three of the last compile are freed when this one finishes).
        for round in 0..1000 {
            for i in 0..3 {
                max_slot = max_slot.max(compiler.backend(&format!("b{round}-{i}"), endpoints()).slot);
            }
            compiler.finish(Draft::default());
        }
        assert!(max_slot < 6, "slot {max_slot}");
        // A name that stays keeps its slot.
        let kept = compiler.backend("kept", endpoints()).slot;
        compiler.finish(Draft::default());
        compiler.backend("other", endpoints());
        assert_eq!(compiler.backend("kept", endpoints()).slot, kept);
    }
}
