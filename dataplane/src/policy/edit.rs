//! A rule's header edits and rewrite applied to an HTTP/1.1 head that ramjet wrote (the request it
//! sends upstream, or the response head it sends a client): fields dropped, the request target's
//! path and the `Host` replaced, fields appended before the blank line. Only routes whose rules
//! have such filters come here; the head is rebuilt into a pooled buffer, so nothing is allocated
//! once the pool is warm. The same edits over HTTP/2 fields ([`edit_fields`], [`rewrite_path`])
//! serve HTTP/2 responses and the requests sent to HTTP/2 backends.

use ramjet_shared::{HeaderEdits, PathRewrite, Rewrite, RewriteScratch};

/// Writes `head` (a complete head ending in the blank line) into `out` with `edits` and `rewrite`
/// applied (`scratch` is the worker's rewrite memory). The framing fields are never touched: the
/// compiler refuses edits that name them.
pub(crate) fn edit_head(
    head: &[u8],
    edits: Option<&HeaderEdits>,
    rewrite: Option<&Rewrite>,
    scratch: &mut RewriteScratch,
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    let Some(first) = lines.next() else { return };
    match rewrite.and_then(|r| r.path.as_ref()) {
        Some(path) => {
            // `METHOD SP target SP HTTP/1.1`: only the target's path changes; the query stays.
            let line = first.strip_suffix(b"\r\n").unwrap_or(first);
            let (Some(a), Some(b)) = (line.iter().position(|&c| c == b' '), line.iter().rposition(|&c| c == b' '))
            else {
                out.extend_from_slice(first);
                return copy_fields(lines, edits, rewrite, out);
            };
            out.extend_from_slice(&line[..=a]);
            rewrite_target(&line[a + 1..b], path, scratch, out);
            out.extend_from_slice(&line[b..]);
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(first),
    }
    copy_fields(lines, edits, rewrite, out);
}

/// Appends the origin-form request `target` to `out` with its path rewritten by `path`; the query
/// stays as it is.
fn rewrite_target(target: &[u8], path: &PathRewrite, scratch: &mut RewriteScratch, out: &mut Vec<u8>) {
    let (only_path, query) = match target.iter().position(|&c| c == b'?') {
        Some(q) => target.split_at(q),
        None => (target, &b""[..]),
    };
    path.append(only_path, scratch, out);
    out.extend_from_slice(query);
}

/// The `:path` of an HTTP/2 request sent upstream under a rule's path rewrite: the client's
/// `target` rewritten as [`edit_head`] rewrites an HTTP/1.1 request line (the query kept), built in
/// `buf` (a pooled buffer). `None` when the result is not a valid `:path`.
pub(crate) fn rewrite_path(
    target: &str,
    path: &PathRewrite,
    scratch: &mut RewriteScratch,
    buf: &mut Vec<u8>,
) -> Option<http::uri::PathAndQuery> {
    buf.clear();
    rewrite_target(target.as_bytes(), path, scratch, buf);
    http::uri::PathAndQuery::try_from(&buf[..]).ok()
}

fn copy_fields<'h>(
    lines: impl Iterator<Item = &'h [u8]>,
    edits: Option<&HeaderEdits>,
    rewrite: Option<&Rewrite>,
    out: &mut Vec<u8>,
) {
    let host = rewrite.and_then(|r| r.host.as_deref());
    for line in lines {
        if line == b"\r\n" {
            break;
        }
        let name = &line[..line.iter().position(|&b| b == b':').unwrap_or(0)];
        if let Some(host) = host.filter(|_| name.eq_ignore_ascii_case(b"host")) {
            out.extend_from_slice(b"host: ");
            out.extend_from_slice(host.as_bytes());
            out.extend_from_slice(b"\r\n");
            continue;
        }
        if edits.is_some_and(|e| e.drops(name)) {
            continue;
        }
        out.extend_from_slice(line);
    }
    for (name, value) in edits.into_iter().flat_map(|e| e.appended()) {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Applies `edits` to HTTP/2 fields: a response's for the client, or a request's for an HTTP/2
/// backend (its `:path` and `:authority` are the rewrite's, see [`rewrite_path`]).
pub(crate) fn edit_fields(fields: &mut http::HeaderMap, edits: &HeaderEdits) {
    for name in edits.remove.iter().chain(edits.set.iter().map(|(n, _)| n)) {
        fields.remove(&**name);
    }
    for (name, value) in edits.appended() {
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(value))
        {
            fields.append(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits() -> HeaderEdits {
        HeaderEdits {
            set: vec![("x-env".into(), "prod".into())].into(),
            add: vec![("x-added".into(), "1".into())].into(),
            remove: vec!["x-secret".into()].into(),
        }
    }

    #[test]
    fn fields_are_dropped_replaced_and_appended_and_the_target_rewritten() {
        let head = b"GET /shop/cart?id=7 HTTP/1.1\r\nhost: shop.test\r\nX-Env: dev\r\nx-secret: s\r\n\
                     content-length: 3\r\nx-keep: k\r\n\r\n";
        let rewrite = Rewrite {
            host: Some("internal.test".into()),
            path: Some(PathRewrite::Prefix { matched: "/shop".into(), with: "/store".into() }),
        };
        let mut out = Vec::new();
        edit_head(head, Some(&edits()), Some(&rewrite), &mut RewriteScratch::default(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /store/cart?id=7 HTTP/1.1\r\nhost: internal.test\r\ncontent-length: 3\r\nx-keep: k\r\n\
             x-env: prod\r\nx-added: 1\r\n\r\n"
        );
        let mut out = Vec::new();
        edit_head(
            b"HTTP/1.1 200 OK\r\nx-secret: s\r\n\r\n",
            Some(&edits()),
            None,
            &mut RewriteScratch::default(),
            &mut out,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "HTTP/1.1 200 OK\r\nx-env: prod\r\nx-added: 1\r\n\r\n");
    }

    #[test]
    fn an_http2_request_gets_the_same_path_and_fields_as_an_http1_head() {
        let prefix = PathRewrite::Prefix { matched: "/shop".into(), with: "/store".into() };
        let (scratch, mut buf) = (&mut RewriteScratch::default(), Vec::new());
        let path = rewrite_path("/shop/cart?id=7&x=/shop", &prefix, scratch, &mut buf).unwrap();
        assert_eq!(path.as_str(), "/store/cart?id=7&x=/shop");
        let full = PathRewrite::Full("/replaced".into());
        assert_eq!(rewrite_path("/any/thing?q", &full, scratch, &mut buf).unwrap().as_str(), "/replaced?q");
        assert_eq!(rewrite_path("/shop", &prefix, scratch, &mut buf).unwrap().as_str(), "/store");

        let mut fields = http::HeaderMap::new();
        for (name, value) in [("x-env", "dev"), ("x-env", "test"), ("x-secret", "s"), ("x-keep", "k")] {
            fields.append(name, http::HeaderValue::from_static(value));
        }
        edit_fields(&mut fields, &edits());
        let mut seen: Vec<_> = fields.iter().map(|(n, v)| format!("{n}: {}", v.to_str().unwrap())).collect();
        seen.sort();
        assert_eq!(seen, ["x-added: 1", "x-env: prod", "x-keep: k"]);
    }
}
