//! Client-certificate authentication of an Ingress's hosts (ingress-nginx's `auth-tls-secret`,
//! `auth-tls-verify-client`, `auth-tls-verify-depth`, `auth-tls-error-page`,
//! `auth-tls-pass-certificate-to-upstream`, `auth-tls-match-cn`), read as ingress-nginx reads them:
//!
//! * a value that cannot be honoured safely (an error page or `match-cn` that does not parse, a
//!   `pass-certificate-to-upstream` that is not a boolean) keeps the Ingress out of the table;
//! * a `verify-client` or `verify-depth` that does not parse takes the default (`on`, `1`), with a
//!   warning;
//! * a Secret that cannot be used (missing, another namespace, no CA) closes the hosts: every
//!   request for them is answered `403` until it is fixed, as ingress-nginx's server-wide
//!   `return 403`. A host that asked for client certificates is never served without them.
//!
//! It applies per host, to every path of every Ingress of the host (nginx's server block); the
//! oldest Ingress that asks decides (`ingress::compile`).

use std::sync::Arc;

use ramjet_shared::{ClientAuth, ClientAuthSpec, Matcher, VerifyClient};

use super::CA_BUNDLE_KEY;
use crate::canary::Annotations;
use crate::compile::annotations::values;
use crate::compile::resolve::Resolver;

/// The Secret key of a revocation list.
const CRL_KEY: &str = "ca.crl";

/// What an Ingress asks of its hosts' clients.
pub(super) enum HostAuth {
    Asks(Arc<ClientAuth>),
    /// The hosts answer 403; the reason is the Ingress's warning.
    Closed(String),
}

impl<'s> Resolver<'s, '_> {
    /// The Ingress's client-certificate authentication, if it asks for one. What keeps the Ingress
    /// out goes to `problems`, what is taken another way to `warnings`.
    pub(super) fn client_auth(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &str,
        problems: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> Option<HostAuth> {
        let (key, value) = annotations.given("auth-tls-secret")?;
        let reference: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(bad) = reference.chars().find(|c| !(c.is_ascii_alphanumeric() || "/-._~:".contains(*c))) {
            problems.push(format!("{key}: {bad:?} cannot be in a Secret reference"));
            return None;
        }
        let settings = Settings::read(annotations, problems, warnings)?;
        let closed = |why: String| {
            Some(HostAuth::Closed(format!("{key}: {why}; its hosts answer 403 until it is fixed, as in ingress-nginx")))
        };
        let Some((secret_namespace, name)) =
            reference.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.contains('/') && !n.is_empty())
        else {
            return closed(format!("`{reference}` is not namespace/name"));
        };
        if secret_namespace != namespace {
            return closed(format!(
                "the Secret {reference} is in another namespace; only the Ingress's own ({namespace}) is allowed"
            ));
        }
        let Some(secret) = self.secret(namespace, name) else {
            return closed(format!("Secret {namespace}/{name} does not exist"));
        };
        let data = secret.data.as_ref();
        let Some(ca) = data.and_then(|d| d.get(CA_BUNDLE_KEY)) else {
            if data.is_some_and(|d| d.contains_key("tls.crt")) {
                warnings.push(format!(
                    "{key}: Secret {namespace}/{name} has no {CA_BUNDLE_KEY}, so no client certificate is asked for, \
                     as in ingress-nginx"
                ));
                return None;
            }
            return closed(format!("Secret {namespace}/{name} has no {CA_BUNDLE_KEY}"));
        };
        let source = format!("{namespace}/{name}");
        let ca = match self.compiler.ca_bundle(&ca.0, &source) {
            Ok(ca) => ca,
            Err(e) => return closed(format!("Secret {source}: {CA_BUNDLE_KEY}: {e}")),
        };
        let spec = ClientAuthSpec {
            verify: settings.verify,
            ca,
            crl: data.and_then(|d| d.get(CRL_KEY)).map(|b| b.0.clone()),
            depth: settings.depth,
            error_page: settings.error_page,
            pass_certificate: settings.pass_certificate,
            match_cn: settings.match_cn,
            source,
        };
        match ClientAuth::new(spec) {
            Ok(auth) => Some(HostAuth::Asks(self.compiler.client_auth(auth))),
            Err(e) => closed(format!("Secret {namespace}/{name}: {CRL_KEY}: {e}")),
        }
    }
}

/// The auth-tls annotations besides the Secret.
struct Settings {
    verify: VerifyClient,
    depth: u8,
    error_page: Option<String>,
    pass_certificate: bool,
    match_cn: Option<Matcher>,
}

impl Settings {
    /// `None` when one of them keeps the Ingress out (reported in `problems`).
    fn read(annotations: &Annotations<'_>, problems: &mut Vec<String>, warnings: &mut Vec<String>) -> Option<Self> {
        let before = problems.len();
        let verify = match annotations.given("auth-tls-verify-client") {
            None => VerifyClient::On,
            Some((key, value)) => match value.trim() {
                "on" => VerifyClient::On,
                "off" => VerifyClient::Off,
                "optional" => VerifyClient::Optional,
                "optional_no_ca" => VerifyClient::OptionalNoCa,
                other => {
                    warnings.push(format!(
                        "{key}: `{other}` is not on, off, optional or optional_no_ca; taken as on, as in ingress-nginx"
                    ));
                    VerifyClient::On
                }
            },
        };
        let depth = match annotations.given("auth-tls-verify-depth") {
            None => 1,
            Some((key, value)) => match value.trim().parse::<i64>() {
                Ok(n) if (1..=100).contains(&n) => n as u8,
                Ok(0) => 1,
                _ => {
                    warnings.push(format!("{key}: `{}` is not a depth from 1 to 100; taken as 1", value.trim()));
                    1
                }
            },
        };
        let error_page = match annotations.given("auth-tls-error-page") {
            None => None,
            Some((key, value)) => {
                let page: String = value.chars().filter(|c| !c.is_whitespace()).collect();
                match values::auth_tls_error_page(&page) {
                    Ok(()) => Some(page),
                    Err(e) => {
                        problems.push(format!("{key}: {e}"));
                        None
                    }
                }
            }
        };
        let pass_certificate = match annotations.given("auth-tls-pass-certificate-to-upstream") {
            None => false,
            Some((key, value)) => match values::parse_go_bool(value) {
                Ok(b) => b,
                Err(e) => {
                    problems.push(format!("{key}: {e}"));
                    false
                }
            },
        };
        let match_cn = match annotations.given("auth-tls-match-cn") {
            None => None,
            Some((key, value)) => match values::match_cn(value) {
                Ok(matcher) => Some(matcher),
                Err(e) => {
                    problems.push(format!("{key}: {e}"));
                    None
                }
            },
        };
        (problems.len() == before).then_some(Settings { verify, depth, error_page, pass_certificate, match_cn })
    }
}
