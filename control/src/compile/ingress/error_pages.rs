//! ingress-nginx's `default-backend` and `custom-http-errors`: a Service of the Ingress's
//! namespace that answers for the Ingress's backends when they have no endpoints (with `X-Code:
//! 503`), and whose answer replaces a backend's answer with one of the listed statuses.

use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressServiceBackend;
use ramjet_shared::error_pages::parse_codes;
use ramjet_shared::{Backend, BackendKind, ErrorPages, Filter};

use crate::canary::Annotations;
use crate::compile::resolve::{PortRef, Resolver};

/// What an Ingress asks of its error backend.
pub(super) struct ErrorBackend {
    pub backend: Arc<Backend>,
    /// `custom-http-errors` (empty: only the no-endpoints case).
    pub codes: Vec<u16>,
}

impl ErrorBackend {
    /// For one path, whose Service is `service` on `port`: the backend it is served by and its
    /// error pages. A backend without endpoints is replaced by the error backend, with the fields
    /// ingress-nginx sends it (`X-Code: 503` and the identity).
    pub fn apply(
        &self,
        backend: Arc<Backend>,
        identity: (&str, &str, &str, &str),
        filters: &mut Vec<Filter>,
    ) -> (Arc<Backend>, Option<Arc<ErrorPages>>) {
        let (namespace, ingress, service, port) = identity;
        let identity = ErrorPages::identity(namespace, ingress, service, port);
        let pages = (!self.codes.is_empty()).then(|| {
            Arc::new(ErrorPages {
                codes: self.codes.clone().into_boxed_slice(),
                backend: self.backend.clone(),
                identity: identity.as_str().into(),
            })
        });
        let empty = matches!(&backend.kind, BackendKind::Endpoints(e) if e.is_empty());
        if !empty {
            return (backend, pages);
        }
        let lines = std::iter::once(("x-code", "503")).chain(identity.lines().filter_map(|l| l.split_once(": ")));
        for (name, value) in lines {
            filters.push(Filter::SetRequestHeader { name: name.into(), value: value.trim_end().into() });
        }
        (self.backend.clone(), pages)
    }
}

impl<'s> Resolver<'s, '_> {
    /// The Ingress's error backend (`default-backend`: a Service of its namespace, on its first
    /// port, as ingress-nginx takes it) and the statuses it answers for. `custom-http-errors`
    /// without `default-backend` passes the backend's answers through, with a warning: ramjet has
    /// no controller-wide default backend Service to send them to. As in ingress-nginx, a value that
    /// cannot be used is reported and left out; the Ingress is served without it.
    pub(super) fn error_backend(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &'s str,
        warnings: &mut Vec<String>,
    ) -> Option<ErrorBackend> {
        let given = |name| annotations.given(name);
        let codes = match given("custom-http-errors") {
            None => Vec::new(),
            Some((key, value)) => parse_codes(value).unwrap_or_else(|e| {
                warnings.push(format!("{key}: {e}; the backend's answers pass through, as in ingress-nginx"));
                Vec::new()
            }),
        };
        let intercept =
            given("disable-proxy-intercept-errors").is_none_or(|(_, v)| !v.trim().eq_ignore_ascii_case("true"));
        let codes = if intercept { codes } else { Vec::new() };
        let Some((key, name)) = given("default-backend") else {
            if let (false, Some((key, _))) = (codes.is_empty(), given("custom-http-errors")) {
                warnings.push(format!(
                    "{key}: without default-backend there is no Service to answer these statuses (ramjet has no \
                     controller-wide default backend); the backend's answers pass through"
                ));
            }
            return None;
        };
        let name = name.trim();
        let Some(service) = self.service(namespace, name) else {
            warnings.push(format!("{key}: Service {namespace}/{name} does not exist; it is not used"));
            return None;
        };
        let first = service.spec.as_ref().and_then(|s| s.ports.as_deref()).and_then(|p| p.first()).map(|p| p.port);
        let Some(port) = first else {
            warnings.push(format!("{key}: Service {namespace}/{name} has no port; it is not used"));
            return None;
        };
        let reference = IngressServiceBackend { name: name.to_string(), port: None };
        match self.resolve_backend(namespace, &reference, PortRef::Number(port)) {
            Ok(backend) => Some(ErrorBackend { backend, codes }),
            Err(e) => {
                warnings.push(format!("{key}: {e}; it is not used"));
                None
            }
        }
    }
}
