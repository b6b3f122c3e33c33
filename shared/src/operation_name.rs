//! A span name as nginx's `opentelemetry_operation_name` writes it (ingress-nginx's
//! `opentelemetry-operation-name`): text and a few request variables, read once when the daemon
//! starts (and by the migration report), filled in by the trace exporter for each span.

/// A span name template: text and `$request_method`, `$uri`, `$request_uri`, `$host`, `$scheme`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationName(Vec<NamePart>);

/// One part of an [`OperationName`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePart {
    Text(String),
    /// `$request_method`.
    Method,
    /// `$uri`: the path, without the query.
    Uri,
    /// `$request_uri`: the target as sent.
    RequestUri,
    /// `$host`: the host, without a port.
    Host,
    /// `$scheme`.
    Scheme,
}

impl OperationName {
    /// Reads a template; an nginx variable other than those above is an error naming it.
    pub fn parse(template: &str) -> Result<OperationName, String> {
        const VARIABLES: [(&str, NamePart); 5] = [
            ("request_method", NamePart::Method),
            ("request_uri", NamePart::RequestUri),
            ("uri", NamePart::Uri),
            ("host", NamePart::Host),
            ("scheme", NamePart::Scheme),
        ];
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(at) = rest.find('$') {
            if at > 0 {
                parts.push(NamePart::Text(rest[..at].into()));
            }
            let after = &rest[at + 1..];
            let name_len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            let name = &after[..name_len];
            let Some((_, part)) = VARIABLES.iter().find(|(v, _)| *v == name) else {
                return Err(format!(
                    "`${name}` is not a variable a span name can use ($request_method, $uri, $request_uri, $host, $scheme)"
                ));
            };
            parts.push(part.clone());
            rest = &after[name_len..];
        }
        if !rest.is_empty() {
            parts.push(NamePart::Text(rest.into()));
        }
        Ok(OperationName(parts))
    }

    pub fn parts(&self) -> &[NamePart] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_text_and_known_variables() {
        let name = OperationName::parse("HTTP $request_method $uri").unwrap();
        assert_eq!(
            name.parts(),
            [NamePart::Text("HTTP ".into()), NamePart::Method, NamePart::Text(" ".into()), NamePart::Uri]
        );
        let e = OperationName::parse("$request_method $upstream_addr").unwrap_err();
        assert!(e.contains("`$upstream_addr` is not a variable"), "{e}");
    }
}
