//! Custom error pages (ingress-nginx's `custom-http-errors` with `default-backend`): when the
//! backend answers with one of the listed statuses, its answer is dropped and the request goes to
//! the error backend instead, as nginx's `proxy_intercept_errors` with `error_page … = @custom`
//! does: the same method and fields, the path `/`, no body, and fields that say what happened
//! (`X-Code`, `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`,
//! `X-Service-Port`). The error backend's answer is the client's.

use std::fmt;
use std::sync::Arc;

use super::Backend;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorPages {
    /// The statuses intercepted (400–599).
    pub codes: Box<[u16]>,
    #[serde(serialize_with = "Backend::serialize_digest")]
    pub backend: Arc<Backend>,
    /// `x-namespace`, `x-ingress-name`, `x-service-name` and `x-service-port` lines, each ending
    /// in CRLF, rendered at compile time.
    pub identity: Box<str>,
}

impl ErrorPages {
    /// The identity lines for an Ingress's path.
    pub fn identity(namespace: &str, ingress: &str, service: &str, port: &str) -> String {
        format!("x-namespace: {namespace}\r\nx-ingress-name: {ingress}\r\nx-service-name: {service}\r\nx-service-port: {port}\r\n")
    }

    #[inline]
    pub fn intercepts(&self, status: u16) -> bool {
        self.codes.contains(&status)
    }
}

impl fmt::Display for ErrorPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let codes: Vec<String> = self.codes.iter().map(u16::to_string).collect();
        write!(f, "error pages for {} from {}", codes.join(","), self.backend.name)
    }
}

/// Parses `custom-http-errors`: comma-separated statuses, each 400–599.
pub fn parse_codes(value: &str) -> Result<Vec<u16>, String> {
    let mut codes = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<u16>() {
            Ok(code) if (400..=599).contains(&code) => {
                if !codes.contains(&code) {
                    codes.push(code);
                }
            }
            _ => return Err(format!("`{part}` is not a status from 400 to 599")),
        }
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_statuses_from_400_to_599() {
        assert_eq!(parse_codes("404, 503,503"), Ok(vec![404, 503]));
        assert!(parse_codes("404,302").is_err());
        assert!(parse_codes("4o4").is_err());
        assert_eq!(parse_codes(""), Ok(vec![]));
    }
}
