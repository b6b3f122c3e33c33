//! Request views: how the pipeline reads a request's fields, cookies, method and target without
//! caring which protocol carried it. Fields are found by walking what was received — only for
//! routes whose conditions or features read them.

use http::request::Parts;
use ramjet_shared::RequestView;

/// A request view that can also list its fields, as external auth's sub-request copies them.
pub(crate) trait RequestFields: RequestView {
    fn each_field(&self) -> impl Iterator<Item = (&[u8], &[u8])>;
}

/// A request view over an HTTP/1 head as received: `head` is the whole head (request line and
/// fields, up to the blank line), `target` the request target. Fields are found by walking the
/// lines — only for routes that have conditions.
pub(crate) struct Http1View<'a> {
    pub head: &'a [u8],
    pub target: &'a [u8],
    pub tls: bool,
}

impl Http1View<'_> {
    /// The field lines after the request line, as (name, trimmed value).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.head
            .split(|&b| b == b'\n')
            .skip(1)
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .take_while(|line| !line.is_empty())
            .filter_map(|line| {
                let colon = line.iter().position(|&b| b == b':')?;
                Some((&line[..colon], trim(&line[colon + 1..])))
            })
    }
}

impl RequestFields for Http1View<'_> {
    fn each_field(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields()
    }
}

impl RequestView for Http1View<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    fn cookie(&self, name: &str) -> Option<&[u8]> {
        self.fields()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
            .find_map(|(_, v)| ramjet_shared::cookie_value(v, name))
    }

    fn method(&self) -> &[u8] {
        let end = self.head.iter().position(|&b| b == b' ').unwrap_or(0);
        &self.head[..end]
    }

    fn query(&self) -> &[u8] {
        match self.target.iter().position(|&b| b == b'?') {
            Some(i) => &self.target[i + 1..],
            None => &[],
        }
    }

    fn path(&self) -> &[u8] {
        let end = self.target.iter().position(|&b| b == b'?').unwrap_or(self.target.len());
        &self.target[..end]
    }

    fn tls(&self) -> bool {
        self.tls
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &v[start..end]
}

/// A request view over an HTTP/2 request's fields (and whether it came over TLS).
pub(crate) struct H2View<'a>(pub &'a Parts, pub bool);

impl RequestFields for H2View<'_> {
    fn each_field(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.0.headers.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
    }
}

impl RequestView for H2View<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.headers.get(name).map(|v| v.as_bytes())
    }

    fn cookie(&self, name: &str) -> Option<&[u8]> {
        // HTTP/2 may split cookies into several fields (RFC 9113 §8.2.3).
        self.0
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .find_map(|v| ramjet_shared::cookie_value(v.as_bytes(), name))
    }

    fn method(&self) -> &[u8] {
        self.0.method.as_str().as_bytes()
    }

    fn query(&self) -> &[u8] {
        self.0.uri.query().unwrap_or("").as_bytes()
    }

    fn path(&self) -> &[u8] {
        self.0.uri.path().as_bytes()
    }

    fn tls(&self) -> bool {
        self.1
    }
}
