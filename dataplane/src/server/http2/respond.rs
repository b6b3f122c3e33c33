//! HTTP/2's spelling of the pipeline's response edits (`crate::pipeline::respond`): fields set on
//! the `http` crate's field map, whether the backend spoke HTTP/1.1 or HTTP/2.

use ramjet_shared::proxy_rewrite::ProxyRewrites;
use ramjet_shared::HeaderEdits;

use crate::pipeline::respond::ResponseFields;

/// A response head as HTTP/2 fields.
impl ResponseFields for http::HeaderMap {
    fn apply_edits(&mut self, edits: &HeaderEdits) {
        crate::policy::edit::edit_fields(self, edits);
    }

    fn set(&mut self, name: &'static str, value: &[u8]) {
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            self.insert(http::HeaderName::from_static(name), value);
        }
    }

    fn rewrite(&mut self, rewrites: &ProxyRewrites) {
        for name in [http::header::LOCATION, http::header::REFRESH, http::header::SET_COOKIE] {
            if !rewrites.concerns(name.as_str().as_bytes()) || !self.contains_key(&name) {
                continue;
            }
            let mut changed = false;
            let values: Vec<http::HeaderValue> = self
                .get_all(&name)
                .iter()
                .map(|value| {
                    let mut out = Vec::new();
                    match rewrites.rewrite(name.as_str().as_bytes(), value.as_bytes(), &mut out) {
                        true => {
                            changed = true;
                            http::HeaderValue::from_bytes(&out).unwrap_or_else(|_| value.clone())
                        }
                        false => value.clone(),
                    }
                })
                .collect();
            if changed {
                self.remove(&name);
                for value in values {
                    self.append(name.clone(), value);
                }
            }
        }
    }

    fn add_cookie_lines(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut lines = Vec::with_capacity(192);
        write(&mut lines);
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let value = line.strip_prefix(b"set-cookie: ").unwrap_or(line);
            let value = value.strip_suffix(b"\r").unwrap_or(value);
            if let Ok(value) = http::HeaderValue::from_bytes(value) {
                self.append(http::header::SET_COOKIE, value);
            }
        }
    }
}
