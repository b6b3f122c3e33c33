//! ingress-nginx's `default-backend` and `custom-http-errors`: a Service of the Ingress's
//! namespace (or the controller's default backend, `--config` `default-backend-service`) that
//! answers for the Ingress's backends when they have no endpoints (with `X-Code: 503`), and whose
//! answer replaces a backend's answer with one of the listed statuses (the Ingress's, or the
//! controller configuration's `custom-http-errors`).

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
    /// The Ingress's error backend and the statuses it answers for: `default-backend` (a Service
    /// of its namespace, on its first port, as ingress-nginx takes it), else the controller's
    /// (`--config` `default-backend-service`); `custom-http-errors`, else the controller's. Without
    /// either Service, listed statuses pass through, with a warning. As in ingress-nginx, a value
    /// that cannot be used is reported and left out; the Ingress is served without it.
    pub(super) fn error_backend(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &'s str,
        warnings: &mut Vec<String>,
    ) -> Option<ErrorBackend> {
        let given = |name| annotations.given(name);
        let codes = match given("custom-http-errors") {
            None => self.compiler.config.custom_http_errors.clone(),
            Some((key, value)) => parse_codes(value).unwrap_or_else(|e| {
                warnings.push(format!("{key}: {e}; the backend's answers pass through, as in ingress-nginx"));
                Vec::new()
            }),
        };
        let intercept =
            given("disable-proxy-intercept-errors").is_none_or(|(_, v)| !v.trim().eq_ignore_ascii_case("true"));
        let codes = if intercept { codes } else { Vec::new() };
        let Some((key, name)) = given("default-backend") else {
            return match self.controller_default_backend() {
                Some(Ok(backend)) => Some(ErrorBackend { backend, codes }),
                // Said once, by the compile that sets the table's default backend.
                Some(Err(_)) => None,
                None => {
                    if let (false, Some((key, _))) = (codes.is_empty(), given("custom-http-errors")) {
                        warnings.push(format!(
                            "{key}: without default-backend, or a controller default backend (--config \
                             default-backend-service), no Service answers these statuses; the backend's answers pass \
                             through"
                        ));
                    }
                    None
                }
            };
        };
        match self.first_port_backend(namespace, name.trim()) {
            Ok(backend) => Some(ErrorBackend { backend, codes }),
            Err(e) => {
                warnings.push(format!("{key}: {e}; it is not used"));
                None
            }
        }
    }

    /// The controller's default backend (`--config` `default-backend-service`), if one is set:
    /// the Service on its first port, or why it cannot be used.
    pub(crate) fn controller_default_backend(&mut self) -> Option<Result<Arc<Backend>, String>> {
        let (namespace, name) = self.compiler.config.default_backend.clone()?;
        Some(self.first_port_backend(&namespace, &name))
    }

    /// Service `namespace/name` on its first port, as ingress-nginx takes a default backend.
    fn first_port_backend(&mut self, namespace: &str, name: &str) -> Result<Arc<Backend>, String> {
        let Some(service) = self.service(namespace, name) else {
            return Err(format!("Service {namespace}/{name} does not exist"));
        };
        let first = service.spec.as_ref().and_then(|s| s.ports.as_deref()).and_then(|p| p.first()).map(|p| p.port);
        let Some(port) = first else {
            return Err(format!("Service {namespace}/{name} has no port"));
        };
        let reference = IngressServiceBackend { name: name.to_string(), port: None };
        self.resolve_backend(namespace, &reference, PortRef::Number(port))
    }
}
