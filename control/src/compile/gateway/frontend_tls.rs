//! A Gateway's client-certificate validation (`spec.tls.frontend`, Gateway API v1.5): for each
//! HTTPS listener, the `perPort` entry of its port, else the `default`.
//!
//! * `caCertificateRefs`: `ca.crt` of ConfigMaps (Core) or Secrets (ramjet's extension), in another
//!   namespace only where a ReferenceGrant allows it; several make one bundle. A reference that
//!   cannot be used is reported on the listener (`ResolvedRefs: False`, `InvalidCACertificateRef`,
//!   `InvalidCACertificateKind`, `RefNotPermitted`) and the others are used; with none usable the
//!   listener is `Accepted: False` (`NoValidCACertificate`), is not served, and its names refuse
//!   every handshake — never served without the validation asked for.
//! * `mode: AllowValidOnly` (the default): the handshake requires a certificate from those CAs and
//!   refuses any other with a TLS alert ([`VerifyClient::Require`]); `AllowInsecureFallback`: a
//!   certificate is asked for, and the backend is told the verdict ([`VerifyClient::Fallback`]); the
//!   Gateway then says so (`InsecureFrontendValidationMode`).
//!
//! Ramjet serves every HTTPS listener on one TLS port, so a listener's validation applies to the
//! server names its hostname covers (one without a hostname: to any name no other claims), chosen
//! by SNI in the handshake, as its certificate is.

use std::sync::Arc;

use ramjet_shared::{CaBundle, ClientAuth, ClientAuthSpec, VerifyClient};
use rustls::RootCertStore;

use super::super::resolve::{CaRefProblem, Resolver};
use super::super::snapshot::namespace_of;
use super::Grants;
use crate::gateway_api::{FrontendValidation, Gateway, Listener, GROUP};

/// Most intermediate certificates between a client's own and a CA: the API leaves it to the
/// implementation; 10 covers real PKIs and bounds the path search.
const DEPTH: u8 = 10;

/// What a listener's validation came to.
pub(super) struct Frontend {
    /// What the handshake and the requests of its names check: with no usable CA, one that
    /// refuses every certificate.
    pub auth: Arc<ClientAuth>,
    /// A reference that could not be used: the listener's `ResolvedRefs` reason and message.
    pub problem: Option<(&'static str, String)>,
    /// Some CA certificate could be used (else `NoValidCACertificate`).
    pub usable: bool,
}

/// The validation `listener` (HTTPS) of `gateway` asks for, if any.
pub(super) fn validation(
    gateway: &Gateway,
    listener: &Listener,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Option<Frontend> {
    let frontend = gateway.spec.tls.as_ref()?.frontend.as_ref()?;
    let per_port = frontend.per_port.iter().find(|p| p.port == listener.port).map(|p| &p.tls);
    let validation = per_port.unwrap_or(&frontend.default).validation.as_ref()?;
    let own = namespace_of(&gateway.metadata.namespace);
    let mut pem = Vec::new();
    let mut problem = None;
    let mut sources = Vec::new();
    for reference in &validation.ca_certificate_refs {
        let (group, kind) =
            (reference.group.as_deref().unwrap_or(""), reference.kind.as_deref().unwrap_or("ConfigMap"));
        let namespace = reference.namespace.as_deref().unwrap_or(own);
        let name = reference.name.as_str();
        let found = if namespace != own && !grants.allows(GROUP, "Gateway", own, group, kind, namespace, name) {
            Err((
                "RefNotPermitted",
                format!("no ReferenceGrant in {namespace} lets Gateways of {own} use {kind} {name}"),
            ))
        } else {
            resolver.ca_certificates(namespace, group, kind, name).map_err(|p| match p {
                CaRefProblem::Unusable(why) => ("InvalidCACertificateRef", why),
                CaRefProblem::WrongKind(why) => ("InvalidCACertificateKind", format!("caCertificateRef {why}")),
            })
        };
        match found {
            Ok(certificates) => {
                pem.extend_from_slice(certificates);
                pem.push(b'\n');
                sources.push(format!("{namespace}/{name}"));
            }
            Err(first) => {
                problem.get_or_insert(first);
            }
        }
    }
    let source = sources.join(", ");
    let bundle = match pem.is_empty() {
        true => None,
        false => match resolver.compiler.ca_bundle(&pem, &source) {
            Ok(bundle) => Some(bundle),
            Err(e) => {
                problem = Some(("InvalidCACertificateRef", format!("the CA certificates of {source}: {e}")));
                None
            }
        },
    };
    let usable = bundle.is_some();
    let verify = mode(validation);
    let spec = ClientAuthSpec {
        // Without a usable CA nothing is let through, whatever the mode asked.
        verify: if usable { verify } else { VerifyClient::Require },
        ca: bundle.unwrap_or_else(no_ca),
        crl: None,
        depth: DEPTH,
        error_page: None,
        pass_certificate: false,
        match_cn: None,
        source: format!("Gateway {own}/{}", gateway.metadata.name.as_deref().unwrap_or("")),
    };
    let auth = ClientAuth::new(spec).expect("no revocation list to read");
    Some(Frontend { auth: resolver.compiler.client_auth(auth), problem, usable })
}

/// Whether `gateway` lets clients through without a valid certificate anywhere
/// (`InsecureFrontendValidationMode`).
pub(super) fn insecure(gateway: &Gateway) -> bool {
    let Some(frontend) = gateway.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else { return false };
    let configs = std::iter::once(&frontend.default).chain(frontend.per_port.iter().map(|p| &p.tls));
    configs.filter_map(|c| c.validation.as_ref()).any(|v| mode(v) == VerifyClient::Fallback)
}

fn mode(validation: &FrontendValidation) -> VerifyClient {
    match validation.mode.as_deref() {
        Some("AllowInsecureFallback") => VerifyClient::Fallback,
        _ => VerifyClient::Require,
    }
}

/// A bundle no certificate chains to.
fn no_ca() -> Arc<CaBundle> {
    let id = CaBundle::id_of(b"ramjet: no usable CA certificate");
    Arc::new(CaBundle { id, roots: Arc::new(RootCertStore::empty()), source: "no usable CA certificate".into() })
}
