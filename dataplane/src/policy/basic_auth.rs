//! Basic authentication on the worker (ingress-nginx's `auth-type: basic`): a request passes when
//! its `Authorization: Basic` credentials are in the route's list.
//!
//! Password hashes are slow on purpose (bcrypt takes tens of milliseconds, and nginx checks them
//! on its worker too), so each worker keeps the `Authorization` values that passed, keyed by the
//! list's [`BasicAuth::id`]: a returning user costs one hash probe. Only successes are kept, so a
//! client guessing passwords cannot push real users out; the set is bounded and starts over when
//! full.

use std::cell::RefCell;
use std::collections::HashSet;

use ramjet_shared::htpasswd::basic_credentials;
use ramjet_shared::BasicAuth;

/// Credentials each worker remembers at most.
pub const MAX_PASSED: usize = 4096;

#[derive(Default)]
pub(crate) struct AuthCache {
    /// The list's id (8 bytes, big endian) followed by the `Authorization` value.
    passed: RefCell<HashSet<Box<[u8]>>>,
    key: RefCell<Vec<u8>>,
}

impl AuthCache {
    /// Whether a request with this `Authorization` value may pass `auth`.
    pub fn admits(&self, auth: &BasicAuth, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else { return false };
        let mut key = self.key.borrow_mut();
        key.clear();
        key.extend_from_slice(&auth.id.to_be_bytes());
        key.extend_from_slice(value);
        if self.passed.borrow().contains(&key[..]) {
            return true;
        }
        let Some((user, password)) = basic_credentials(value) else { return false };
        if !auth.users.verify(&user, &password) {
            return false;
        }
        let mut passed = self.passed.borrow_mut();
        if passed.len() >= MAX_PASSED {
            passed.clear();
        }
        passed.insert(key.as_slice().into());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ramjet_shared::htpasswd::Htpasswd;

    /// `Authorization` values, encoded by Python's base64.
    fn basic(user_pass: &str) -> Vec<u8> {
        let encoded = match user_pass {
            "foo:bar" => "Zm9vOmJhcg==",
            "foo:baz" => "Zm9vOmJheg==",
            "bob:bar" => "Ym9iOmJhcg==",
            "foo:new" => "Zm9vOm5ldw==",
            _ => unreachable!("no encoding for {user_pass}"),
        };
        format!("Basic {encoded}").into_bytes()
    }

    #[test]
    fn only_listed_credentials_pass_and_a_changed_list_forgets_them() {
        let cache = AuthCache::default();
        let (users, _) = Htpasswd::parse("foo:{PLAIN}bar\n");
        let auth = BasicAuth::new("test", users, "default/basic");
        assert!(!cache.admits(&auth, None));
        assert!(!cache.admits(&auth, Some(&basic("foo:baz"))));
        assert!(!cache.admits(&auth, Some(&basic("bob:bar"))));
        assert!(!cache.admits(&auth, Some(b"Bearer foo")));
        assert!(cache.admits(&auth, Some(&basic("foo:bar"))));
        // Remembered: the second check does not hash again.
        assert!(cache.admits(&auth, Some(&basic("foo:bar"))));
        assert_eq!(cache.passed.borrow().len(), 1);
        // The password changed: the remembered success is not this list's.
        let (changed, _) = Htpasswd::parse("foo:{PLAIN}new\n");
        let changed = BasicAuth::new("test", changed, "default/basic");
        assert!(!cache.admits(&changed, Some(&basic("foo:bar"))));
        assert!(cache.admits(&changed, Some(&basic("foo:new"))));
    }
}
