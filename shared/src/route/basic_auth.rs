//! HTTP basic authentication of a route (ingress-nginx's `auth-type: basic` with `auth-secret`
//! and `auth-realm`): a request whose `Authorization: Basic` credentials are not in the route's
//! htpasswd list is answered `401` with a `WWW-Authenticate` challenge naming the realm.
//!
//! Checking a password can be slow by design (bcrypt takes tens of milliseconds), so workers keep
//! the credentials that passed ([`BasicAuth::id`] tells one list from another, and changes with
//! its contents: a Secret that changes leaves nothing stale behind).

use std::fmt;

use super::htpasswd::Htpasswd;

/// One route's users and the realm of its challenge.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct BasicAuth {
    /// `auth-realm` (empty when not given, as in ingress-nginx).
    pub realm: Box<str>,
    pub users: Htpasswd,
    /// Where the users came from (`namespace/secret`), for the audit trail.
    pub source: Box<str>,
    /// A digest of realm and users: the key workers cache successful checks under.
    #[serde(skip)]
    pub id: u64,
    /// The `WWW-Authenticate` value of a 401, built once from the realm.
    #[serde(skip)]
    challenge: Box<str>,
}

impl BasicAuth {
    pub fn new(realm: &str, users: Htpasswd, source: &str) -> Self {
        let digest = crate::digest::digest_of(&(realm, &users));
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest.0[..8]);
        let challenge = challenge(realm).into();
        BasicAuth { realm: realm.into(), users, source: source.into(), id: u64::from_be_bytes(id), challenge }
    }

    /// The `WWW-Authenticate` value: `Basic realm="<realm>"`.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }
}

/// `Basic realm="<realm>"`, quotes and backslashes escaped (RFC 9110's quoted-string).
fn challenge(realm: &str) -> String {
    let mut out = String::with_capacity(realm.len() + 16);
    out.push_str("Basic realm=\"");
    for c in realm.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The digest stands for the users: the audit trail shows that they changed, never who or how.
        write!(f, "basic auth {:?} by {} ({} users, {:016x})", self.realm, self.source, self.users.len(), self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_names_the_realm_and_the_id_follows_the_contents() {
        let (users, _) = Htpasswd::parse("foo:{PLAIN}bar\n");
        let auth = BasicAuth::new("test \"auth\"", users.clone(), "default/basic");
        assert_eq!(auth.challenge(), r#"Basic realm="test \"auth\"""#);
        assert_eq!(auth.id, BasicAuth::new("test \"auth\"", users.clone(), "elsewhere/x").id);
        assert_ne!(auth.id, BasicAuth::new("other", users, "default/basic").id);
        let (others, _) = Htpasswd::parse("foo:{PLAIN}baz\n");
        assert_ne!(auth.id, BasicAuth::new("test \"auth\"", others, "default/basic").id);
    }
}
