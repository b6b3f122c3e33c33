//! Basic authentication of an Ingress's paths (ingress-nginx's `auth-type: basic`, `auth-secret`,
//! `auth-secret-type`, `auth-realm`), read from the Ingress's annotations and its Secret.
//!
//! As in ingress-nginx, a Secret that cannot be used (missing, in another namespace, without an
//! `auth` key) does not open the paths: they answer 503 (ingress-nginx's "location denied") and
//! the Ingress gets a warning saying why.

use std::sync::Arc;

use ramjet_shared::htpasswd::Htpasswd;
use ramjet_shared::BasicAuth;

use crate::canary::Annotations;
use crate::compile::resolve::Resolver;

/// The Secret key of an `auth-file` Secret.
const AUTH_FILE_KEY: &str = "auth";

/// What an Ingress asks for by way of basic authentication.
pub(super) enum AuthPlan {
    None,
    Users(Arc<BasicAuth>),
    /// The paths answer 503; the reason is the Ingress's warning.
    Denied(String),
}

impl<'s> Resolver<'s, '_> {
    /// The Ingress's basic authentication. `warnings` learns about unusable lines of the file.
    /// Kinds other than `basic` were refused already (the annotation registry).
    pub(super) fn basic_auth(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &'s str,
        warnings: &mut Vec<String>,
    ) -> AuthPlan {
        let given = |name| annotations.given(name);
        if given("auth-type").is_none_or(|(_, v)| v.trim() != "basic") {
            return AuthPlan::None;
        }
        let Some((key, secret)) = given("auth-secret") else {
            return AuthPlan::Denied("auth-type is basic but there is no auth-secret naming its users".into());
        };
        let secret = secret.trim();
        let (secret_namespace, name) = secret.split_once('/').unwrap_or((namespace, secret));
        if secret_namespace != namespace {
            return AuthPlan::Denied(format!(
                "{key}: the Secret {secret} is in another namespace; only the Ingress's own namespace ({namespace}) \
                 is allowed, as in ingress-nginx"
            ));
        }
        let Some(found) = self.secret(namespace, name) else {
            return AuthPlan::Denied(format!("{key}: Secret {namespace}/{name} does not exist"));
        };
        let data = found.data.as_ref();
        let map = given("auth-secret-type").is_some_and(|(_, v)| v.trim() == "auth-map");
        let (users, problems) = if map {
            let pairs = data.into_iter().flatten().filter_map(|(user, hash)| {
                let hash = std::str::from_utf8(&hash.0).ok()?;
                Some((user.as_str(), hash.trim()))
            });
            Htpasswd::from_pairs(pairs)
        } else {
            let Some(file) = data.and_then(|d| d.get(AUTH_FILE_KEY)) else {
                return AuthPlan::Denied(format!(
                    "{key}: Secret {namespace}/{name} has no `{AUTH_FILE_KEY}` key (an htpasswd file)"
                ));
            };
            let Ok(text) = std::str::from_utf8(&file.0) else {
                return AuthPlan::Denied(format!("{key}: Secret {namespace}/{name}: `{AUTH_FILE_KEY}` is not text"));
            };
            Htpasswd::parse(text)
        };
        for problem in problems {
            warnings.push(format!("{key}: Secret {namespace}/{name}: {problem}; that user cannot sign in"));
        }
        let realm = annotations.get("auth-realm").map_or("", |(_, v)| v.trim());
        if let Some(bad) = realm.chars().find(|c| c.is_control() || !c.is_ascii()) {
            return AuthPlan::Denied(format!("auth-realm: {bad:?} cannot be sent in a WWW-Authenticate challenge"));
        }
        AuthPlan::Users(Arc::new(BasicAuth::new(realm, users, &format!("{namespace}/{name}"))))
    }
}
