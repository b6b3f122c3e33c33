//! ingress-nginx's external authentication (`auth-url`, `auth-method`, `auth-response-headers`,
//! `auth-signin`, `auth-signin-redirect-param`, `auth-request-redirect`), read from an Ingress's
//! annotations into the route's [`ExternalAuth`].
//!
//! `auth-url` names a Service of the cluster (`http://<service>[.<namespace>[.svc[.cluster.local]]][:port]/path`,
//! plain HTTP inside the cluster), or the request's own host (`http(s)://$host/path`, as
//! oauth2-proxy's set-up has it), which is routed through ramjet's own table. Any other URL cannot
//! be reached by ramjet (it resolves no DNS names): the Ingress is not served, since serving it
//! without its authentication would open it to everyone.

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
    pub(super) fn external_auth(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &'s str,
        problems: &mut Vec<String>,
    ) -> Option<Arc<ExternalAuth>> {
        let given = |name| annotations.given(name);
        let (key, url) = given("auth-url")?;
        let url = url.trim();
        let (_, authority, path) = split_auth_url(url).map_err(|e| problems.push(format!("{key}: {e}"))).ok()?;
        let service = if SAME_HOST.contains(&authority) {
            AuthService::SameHost
        } else {
            let (host, port) = match authority.rsplit_once(':') {
                None => (authority, 80),
                Some((h, p)) => match p.parse::<i32>() {
                    Ok(port) => (h, port),
                    Err(_) => {
                        problems.push(format!("{key}: `{url}`: `{p}` is not a port"));
                        return None;
                    }
                },
            };
            let host = host.trim_end_matches(".cluster.local").trim_end_matches(".svc");
            let (name, service_namespace) = host.split_once('.').unwrap_or((host, namespace));
            if service_namespace.contains('.') {
                problems.push(format!(
                    "{key}: `{url}`: ramjet reaches Services of the cluster (service[.namespace]) or $host, not other \
                     hosts; serving the Ingress without its authentication would open it to everyone"
                ));
                return None;
            }
            let reference = IngressServiceBackend { name: name.to_string(), port: None };
            match self.resolve_backend(service_namespace, &reference, PortRef::Number(port)) {
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
        Some(Arc::new(ExternalAuth {
            service,
            url: url.into(),
            target: path.into(),
            method,
            response_headers: response_headers.into_boxed_slice(),
            signin,
            request_redirect,
            always_set_cookie,
        }))
    }
}
