//! ingress-nginx's `custom-headers`: a ConfigMap of the Ingress's namespace whose entries are set
//! on every answer of the Ingress's backends (nginx's `more_set_headers`). As in ingress-nginx,
//! each name must be listed in the controller configuration's `global-allowed-response-headers`,
//! and names and values must be plain text; a ConfigMap that is missing or breaks one of these
//! rules does not drop the headers silently: the Ingress's paths answer 503 ("location denied")
//! and the Ingress gets a warning saying why.

use ramjet_shared::HeaderEdits;

use crate::canary::Annotations;
use crate::compile::resolve::Resolver;

impl<'s> Resolver<'s, '_> {
    /// The fields `custom-headers` sets on the Ingress's answers; `Err` says why its paths are
    /// denied instead.
    pub(super) fn custom_headers(
        &self,
        annotations: &Annotations<'_>,
        namespace: &str,
    ) -> Result<Option<HeaderEdits>, String> {
        let Some((key, value)) = annotations.given("custom-headers") else { return Ok(None) };
        let fields = self.header_fields(&key, value, namespace)?;
        let allowed = &self.compiler.config.allowed_response_headers;
        let mut set = Vec::new();
        for (header, value) in fields {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&header)) {
                return Err(format!(
                    "{key}: {header} is not in the controller configuration's global-allowed-response-headers"
                ));
            }
            set.push((header.to_ascii_lowercase().into_boxed_str(), value));
        }
        Ok(Some(HeaderEdits { set: set.into(), add: Box::new([]), remove: Box::new([]) }))
    }

    /// ingress-nginx's `auth-proxy-set-headers`: the fields of a ConfigMap of the Ingress's
    /// namespace set on the `auth-url` sub-request (replacing the client's own). As in
    /// ingress-nginx, a ConfigMap that is missing, in another namespace, or with a field that is not
    /// one makes the Ingress's paths answer 503 (`Err`); without `auth-url` it is not read.
    pub(super) fn auth_set_headers(
        &self,
        annotations: &Annotations<'_>,
        namespace: &str,
    ) -> Result<AuthFields, String> {
        if annotations.given("auth-url").is_none() {
            return Ok(Box::new([]));
        }
        let Some((key, value)) = annotations.given("auth-proxy-set-headers") else { return Ok(Box::new([])) };
        let fields = self.header_fields(&key, value, namespace)?;
        Ok(fields.into_iter().map(|(name, value)| (name.to_ascii_lowercase().into_boxed_str(), value)).collect())
    }

    /// The fields of the ConfigMap `value` names (`name` or `namespace/name`, the Ingress's
    /// namespace only), as written, each checked as ingress-nginx checks header names and values.
    fn header_fields(&self, key: &str, value: &str, namespace: &str) -> Result<Vec<Field>, String> {
        let value = value.trim();
        let (map_namespace, name) = value.split_once('/').unwrap_or((namespace, value));
        if map_namespace != namespace {
            return Err(format!(
                "{key}: the ConfigMap {value} is in another namespace; only the Ingress's own ({namespace}) is allowed"
            ));
        }
        let Some(map) = self.config_map(namespace, name) else {
            return Err(format!(
                "{key}: ConfigMap {namespace}/{name} does not exist (or ramjet may not list ConfigMaps)"
            ));
        };
        let mut fields = Vec::new();
        for (header, value) in map.data.iter().flatten() {
            if !valid_name(header) {
                return Err(format!("{key}: `{header}` in ConfigMap {namespace}/{name} is not a header name"));
            }
            if !valid_value(value) {
                return Err(format!("{key}: the value of {header} in ConfigMap {namespace}/{name} is not plain text"));
            }
            fields.push((header.as_str().into(), value.as_str().into()));
        }
        Ok(fields)
    }
}

/// A field: (name, value).
type Field = (Box<str>, Box<str>);

/// Fields set on a sub-request.
pub(super) type AuthFields = Box<[Field]>;

/// ingress-nginx's header name pattern: letters, digits, `-` and `_`.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// ingress-nginx's header value pattern: letters, digits, spaces and the punctuation its regex
/// lists (no control characters: nothing can end the field early).
fn valid_value(value: &str) -> bool {
    const MORE: &[u8] = b"_ :;.,\\/\"'?!(){}[]@<>=-+*#$&`|~^%";
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || MORE.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_checked_as_ingress_nginx_does() {
        assert!(valid_name("My-Custom_Header2"));
        assert!(!valid_name("My Header") && !valid_name("a:b") && !valid_name(""));
        assert!(valid_value("42") && valid_value("$remote_addr") && valid_value("max-age=60, private"));
        assert!(!valid_value("a\r\nb: c") && !valid_value("tab\there") && !valid_value("é"));
    }
}
