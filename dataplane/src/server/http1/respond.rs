//! The HTTP/1.1 client's response head, whatever the backend spoke: the pipeline's response edits
//! ([`crate::pipeline::respond`]) written into the head bytes, and the request's id.

use ramjet_shared::proxy_rewrite::ProxyRewrites;
use ramjet_shared::HeaderEdits;

use super::conn::ClientConn;
use crate::codec::http1::body::BODY_TOO_LARGE;
use crate::error::ProxyError;
use crate::pipeline::respond::{edit_response, ResponseFields};
use crate::pipeline::route::RouteExtras;
use crate::worker::Worker;

/// A response head in HTTP/1.1 text, ending in the blank line.
struct Http1Response<'a> {
    head: &'a mut Vec<u8>,
    worker: &'a Worker,
}

impl ResponseFields for Http1Response<'_> {
    fn apply_edits(&mut self, edits: &HeaderEdits) {
        let worker = self.worker;
        let mut edited = worker.out_buffers.take();
        crate::policy::edit::edit_head(self.head, Some(edits), None, &mut worker.rewrite.borrow_mut(), &mut edited);
        worker.out_buffers.give(std::mem::replace(self.head, edited));
    }

    fn set(&mut self, name: &'static str, value: &[u8]) {
        crate::policy::filters::set_field(self.head, name.as_bytes(), value);
    }

    fn rewrite(&mut self, rewrites: &ProxyRewrites) {
        let worker = self.worker;
        let mut edited = worker.out_buffers.take();
        edited.clear();
        let mut changed = false;
        for line in self.head.split_inclusive(|&b| b == b'\n') {
            let field = line.iter().position(|&b| b == b':').map(|colon| (&line[..colon], &line[colon + 1..]));
            // The fields that may be rewritten, by their lower-case names (no copy of the others').
            let known = field.and_then(|(name, value)| {
                let known: &[u8] =
                    [&b"location"[..], b"refresh", b"set-cookie"].into_iter().find(|k| name.eq_ignore_ascii_case(k))?;
                Some((known, value.trim_ascii()))
            });
            if let Some((name, value)) = known {
                if rewrites.concerns(name) {
                    let start = edited.len();
                    edited.extend_from_slice(name);
                    edited.extend_from_slice(b": ");
                    if rewrites.rewrite(name, value, &mut edited) {
                        edited.extend_from_slice(b"\r\n");
                        changed = true;
                        continue;
                    }
                    edited.truncate(start);
                }
            }
            edited.extend_from_slice(line);
        }
        match changed {
            true => worker.out_buffers.give(std::mem::replace(self.head, edited)),
            false => worker.out_buffers.give(edited),
        }
    }

    fn add_cookie_lines(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        // Before the blank line that ends the head.
        self.head.truncate(self.head.len() - 2);
        write(self.head);
        self.head.extend_from_slice(b"\r\n");
    }
}

/// Completes the client's response head in `conn.out` (an HTTP/1.1 head answering `status`): the
/// response edits, and the request's id (the client learns it from the response too).
pub(super) fn finish_response_head<S>(conn: &mut ClientConn<'_, S>, extras: &RouteExtras<'_>, status: u16) {
    edit_response(extras, status, &mut Http1Response { head: &mut conn.out, worker: conn.worker });
    if let Some(id) = &conn.request_id {
        id.insert_before_end(&mut conn.out);
    }
}

/// A request body's framing error, or its route's size limit (413).
pub(super) fn body_error(why: &'static str) -> ProxyError {
    if why == BODY_TOO_LARGE {
        ProxyError::BodyTooLarge
    } else {
        ProxyError::BadRequest(why)
    }
}
