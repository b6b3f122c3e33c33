//! What a worker shows of a request to the route's conditions and hash keys: a read-only view
//! ([`RequestView`]), and the `name=value` lists (cookies, query strings) both read values from.

/// What a worker needs to evaluate conditions: read-only views of the request, in place.
pub trait RequestView {
    /// The first field named `name` (given in lower case), trimmed.
    fn header(&self, name: &str) -> Option<&[u8]>;
    /// The value of the first cookie named `name` (ASCII case-insensitive, as nginx's `$cookie_`)
    /// in the `Cookie` fields; [`find_pair`] with `;` does it for one field.
    fn cookie(&self, name: &str) -> Option<&[u8]>;
    fn method(&self) -> &[u8];
    /// The query string, without the `?` (empty when there is none).
    fn query(&self) -> &[u8];
    /// The path as sent, without the query.
    fn path(&self) -> &[u8];
    /// Whether the request came over TLS.
    fn tls(&self) -> bool;
}

/// In `a=1; b=2` (separated by `sep`), the value of the first pair named `name`.
pub fn find_pair<'a>(text: &'a [u8], sep: u8, name: &str) -> Option<&'a [u8]> {
    for pair in text.split(|&b| b == sep) {
        let pair = trim(pair);
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        let k = trim(k);
        if k.eq_ignore_ascii_case(name.as_bytes()) {
            return Some(trim(v));
        }
    }
    None
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &v[start..end]
}

/// The value of the first cookie named `name` in one `Cookie` field value.
#[inline]
pub fn cookie_value<'a>(field: &'a [u8], name: &str) -> Option<&'a [u8]> {
    find_pair(field, b';', name)
}
