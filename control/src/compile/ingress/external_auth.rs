//! ingress-nginx's external authentication (`auth-url`, `auth-method`, `auth-response-headers`,
//! `auth-signin`, `auth-signin-redirect-param`, `auth-request-redirect`), read from an Ingress's
//! annotations into the route's [`ExternalAuth`].
//!
//! `auth-url` names a Service of the cluster (`http://<service>[.<namespace>[.svc[.cluster.local]]][:port]/path`,
//! plain HTTP inside the cluster), the request's own host (`http(s)://$host/path`, as oauth2-proxy's
//! set-up has it), which is routed through ramjet's own table, or any other host — an identity
//! provider, an oauth2-proxy outside the cluster — by its address or its DNS name, resolved on the
//! control thread ([`crate::dns`]). Over `https://` such a host's certificate is verified against the
//! Mozilla root certificates and the URL's host name. A host that does not resolve (yet) has no
//! endpoints: its requests answer 500, never open.

use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressServiceBackend;
use ramjet_shared::external_auth::{signin_with_redirect, SIGNIN_VARIABLES};

use ramjet_shared::{AuthService, ExternalAuth};

use crate::canary::Annotations;
use crate::compile::annotations::values::{split_auth_url, SAME_HOST};
use crate::compile::resolve::{PortRef, Resolver};

/// ingress-nginx's default `auth-signin-redirect-param`.
const REDIRECT_PARAM: &str = "rd";

impl<'s> Resolver<'s, '_> {
    /// The Ingress's external authentication, if it asks for one; a problem keeps it out.
    /// `set_headers`: the `auth-proxy-set-headers` fields ([`Resolver::auth_set_headers`]).
    pub(super) fn external_auth(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &'s str,
        set_headers: super::custom_headers::AuthFields,
        problems: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> Option<Arc<ExternalAuth>> {
        let given = |name| annotations.given(name);
        let (key, url) = given("auth-url")?;
        let url = url.trim();
        let (https, authority, path) = split_auth_url(url).map_err(|e| problems.push(format!("{key}: {e}"))).ok()?;
        let service = if SAME_HOST.contains(&authority) {
            AuthService::SameHost
        } else {
            let (host, port) = match authority.rsplit_once(':') {
                None => (authority, if https { 443 } else { 80 }),
                Some((h, p)) => match p.parse::<i32>() {
                    Ok(port) => (h, port),
                    Err(_) => {
                        problems.push(format!("{key}: `{url}`: `{p}` is not a port"));
                        return None;
                    }
                },
            };
            // A Service of the cluster: `service`, `service.namespace` of a Service that exists, or
            // any name under `.svc`. Anything else is a host outside the cluster.
            let short = host.trim_end_matches(".cluster.local").trim_end_matches(".svc");
            let (name, service_namespace) = short.split_once('.').unwrap_or((short, namespace));
            let exists = !service_namespace.contains('.') && self.service(service_namespace, name).is_some();
            let cluster_name = exists || short.len() != host.len() || !short.contains('.');
            let backend = match (cluster_name, https) {
                (true, false) => {
                    let reference = IngressServiceBackend { name: name.to_string(), port: None };
                    self.resolve_backend(service_namespace, &reference, PortRef::Number(port))
                }
                (true, true) => Err(format!(
                    "`{url}`: a Service of the cluster is asked in plain HTTP: use http:// (https:// is for $host and \
                     hosts outside the cluster)"
                )),
                (false, _) => {
                    let backend = self.external_host("auth", host, port, https);
                    if let Some(note) = self.dns_notes.get(&("Host", None, crate::dns::normalize(host))) {
                        warnings.push(format!("{key}: {note}"));
                    }
                    backend
                }
            };
            match backend {
                Ok(backend) => AuthService::Backend { backend, host: authority.into() },
                Err(e) => {
                    problems.push(format!("{key}: {e}"));
                    return None;
                }
            }
        };
        let method = match given("auth-method") {
            None => None,
            Some((_, m)) if m.trim().bytes().all(|b| b.is_ascii_uppercase()) => Some(m.trim().into()),
            Some((key, m)) => {
                problems.push(format!("{key}: `{m}` is not an HTTP method"));
                return None;
            }
        };
        let mut response_headers = Vec::new();
        if let Some((key, list)) = given("auth-response-headers") {
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                    problems.push(format!("{key}: `{name}` is not a header name"));
                    return None;
                }
                response_headers.push(name.to_ascii_lowercase().into_boxed_str());
            }
        }
        let signin = match given("auth-signin") {
            None => None,
            Some((key, signin)) => {
                let signin = signin.trim();
                let unknown = signin
                    .match_indices('$')
                    .any(|(i, _)| !SIGNIN_VARIABLES.iter().any(|v| signin[i..].starts_with(v)));
                if unknown || signin.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                    problems.push(format!(
                        "{key}: `{signin}` is not a URL ramjet can build (variables: {})",
                        SIGNIN_VARIABLES.join(", ")
                    ));
                    return None;
                }
                let param = given("auth-signin-redirect-param").map_or(REDIRECT_PARAM, |(_, p)| p.trim());
                Some(signin_with_redirect(signin, param).into_boxed_str())
            }
        };
        let request_redirect = given("auth-request-redirect").map(|(_, r)| r.trim().into());
        let always_set_cookie =
            given("auth-always-set-cookie").is_some_and(|(_, v)| v.trim().eq_ignore_ascii_case("true"));
        if let AuthService::Backend { backend, .. } = &service {
            if backend.endpoint_count() == 0 {
                warnings.push(format!("{key}: `{url}` has no address yet: requests answer 500 until it has one"));
            }
        }
        Some(Arc::new(ExternalAuth {
            service,
            url: url.into(),
            target: path.into(),
            method,
            response_headers: response_headers.into_boxed_slice(),
            signin,
            request_redirect,
            always_set_cookie,
            set_headers,
        }))
    }
}
