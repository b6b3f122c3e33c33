//! A streaming validator/decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1).
//!
//! The proxy forwards chunked bodies as they are, so the decoder's main job is to find where the body
//! ends and to refuse framing that two parsers could read differently (bare LF, bad sizes, overflow,
//! whitespace where the grammar has none, trailer lines that are not fields): that is how requests
//! get smuggled. Trailer fields are checked like header fields (a token, a colon, a value without
//! control characters, no obs-fold), and the ones that would frame or route a message
//! (`Content-Length`, `Transfer-Encoding`, `Host`) are refused. For an HTTP/1.0 client it also
//! reports the data ranges, so the proxy can strip the framing.

/// Why a chunked body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    /// Whitespace after the size: only `;` (an extension) or the line end may follow.
    SizeWs,
    Ext,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    EndLf,
    Done,
}

/// Longest trailer section accepted.
const MAX_TRAILERS: usize = 8 * 1024;
/// Longest chunk extension accepted.
const MAX_EXT: usize = 1024;

/// Longest trailer field name kept for the framing-field check (`transfer-encoding`).
const NAME_KEPT: usize = 17;

pub struct ChunkedDecoder {
    state: State,
    digits: u8,
    remaining: u64,
    side_bytes: usize,
    name: [u8; NAME_KEPT],
    name_len: usize,
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Trailer fields that would change how a message is framed or routed.
fn forbidden_trailer(name: &[u8]) -> bool {
    [&b"content-length"[..], b"transfer-encoding", b"host"].iter().any(|f| name.eq_ignore_ascii_case(f))
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder { state: State::Size, digits: 0, remaining: 0, side_bytes: 0, name: [0; NAME_KEPT], name_len: 0 }
    }

    /// True once the last chunk and the trailer section have been seen.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes as much of `input` as belongs to the body and returns how many bytes that was;
    /// `on_data(start, end)` is called for each range of payload bytes within `input`.
    pub fn feed(&mut self, input: &[u8], mut on_data: impl FnMut(usize, usize)) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if self.digits == 15 {
                            return Err(ChunkError("chunk size too large"));
                        }
                        let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                        self.remaining = self.remaining << 4 | v;
                        self.digits += 1;
                    }
                    b';' if self.digits > 0 => {
                        self.state = State::Ext;
                        self.side_bytes = 0;
                    }
                    b' ' | b'\t' if self.digits > 0 => {
                        self.state = State::SizeWs;
                        self.side_bytes = 0;
                    }
                    b'\r' if self.digits > 0 => self.state = State::SizeLf,
                    _ => return Err(ChunkError("invalid chunk size")),
                },
                State::SizeWs => match b {
                    b' ' | b'\t' => {
                        self.side_bytes += 1;
                        if self.side_bytes > MAX_EXT {
                            return Err(ChunkError("chunk extension too long"));
                        }
                    }
                    b';' => self.state = State::Ext,
                    _ => return Err(ChunkError("whitespace after a chunk size without an extension")),
                },
                State::Ext => match b {
                    b'\r' => self.state = State::SizeLf,
                    b'\n' => return Err(ChunkError("bare LF in chunk extension")),
                    0..=8 | 11..=31 | 127 => return Err(ChunkError("control character in chunk extension")),
                    _ => {
                        self.side_bytes += 1;
                        if self.side_bytes > MAX_EXT {
                            return Err(ChunkError("chunk extension too long"));
                        }
                    }
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ChunkError("chunk size line not ended by CRLF"));
                    }
                    self.digits = 0;
                    if self.remaining == 0 {
                        self.state = State::TrailerStart;
                        self.side_bytes = 0;
                    } else {
                        self.state = State::Data;
                    }
                }
                State::Data => {
                    let take = (input.len() - i).min(self.remaining.min(usize::MAX as u64) as usize);
                    on_data(i, i + take);
                    self.remaining -= take as u64;
                    i += take;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    continue;
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(ChunkError("chunk data longer than its size"));
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkError("chunk data not ended by CRLF"));
                    }
                    self.state = State::Size;
                }
                State::TrailerStart => match b {
                    b'\r' => self.state = State::EndLf,
                    _ if is_tchar(b) => {
                        self.state = State::TrailerName;
                        self.name_len = 0;
                        continue;
                    }
                    b' ' | b'\t' => return Err(ChunkError("obs-fold in trailer")),
                    _ => return Err(ChunkError("trailer line is not a field")),
                },
                State::TrailerName => {
                    self.count_trailer_byte()?;
                    match b {
                        _ if is_tchar(b) => {
                            if self.name_len < NAME_KEPT {
                                self.name[self.name_len] = b;
                            }
                            self.name_len += 1;
                        }
                        b':' => {
                            let kept = self.name_len.min(NAME_KEPT);
                            if self.name_len <= NAME_KEPT && forbidden_trailer(&self.name[..kept]) {
                                return Err(ChunkError("framing field in trailer"));
                            }
                            self.state = State::TrailerValue;
                        }
                        _ => return Err(ChunkError("invalid trailer field name")),
                    }
                }
                State::TrailerValue => {
                    self.count_trailer_byte()?;
                    match b {
                        b'\r' => self.state = State::TrailerLf,
                        b'\n' => return Err(ChunkError("bare LF in trailer")),
                        b'\t' => {}
                        0..=31 | 127 => return Err(ChunkError("control character in trailer")),
                        _ => {}
                    }
                }
                State::TrailerLf => {
                    if b != b'\n' {
                        return Err(ChunkError("trailer line not ended by CRLF"));
                    }
                    self.state = State::TrailerStart;
                }
                State::EndLf => {
                    if b != b'\n' {
                        return Err(ChunkError("chunked body not ended by CRLF"));
                    }
                    self.state = State::Done;
                    return Ok(i + 1);
                }
                State::Done => return Ok(i),
            }
            i += 1;
        }
        Ok(i)
    }

    fn count_trailer_byte(&mut self) -> Result<(), ChunkError> {
        self.side_bytes += 1;
        if self.side_bytes > MAX_TRAILERS {
            return Err(ChunkError("trailer section too large"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Result<(Vec<u8>, usize, bool), ChunkError> {
        let mut d = ChunkedDecoder::new();
        let mut data = Vec::new();
        let mut consumed = 0;
        for c in chunks {
            let n = d.feed(c, |a, b| data.extend_from_slice(&c[a..b]))?;
            consumed += n;
            if d.is_done() {
                break;
            }
        }
        Ok((data, consumed, d.is_done()))
    }

    #[test]
    fn decodes_whole_and_split_bodies() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\nGET / HTTP/1.1";
        let (data, consumed, done) = decode(&[body]).unwrap();
        assert_eq!(data, b"Wikipedia");
        assert!(done);
        assert_eq!(&body[consumed..], b"GET / HTTP/1.1");
        for split in 1..body.len() - 14 {
            let (a, b) = body.split_at(split);
            let (data, _, done) = decode(&[a, b]).unwrap();
            assert_eq!(data, b"Wikipedia", "split at {split}");
            assert!(done);
        }
    }

    #[test]
    fn accepts_trailers() {
        let (data, _, done) = decode(&[b"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n"]).unwrap();
        assert_eq!(data, b"abc");
        assert!(done);
        let (_, _, done) = decode(&[b"3 ;ext\r\nabc\r\n0\r\nX-Sum:\r\nContent-Lengthy: 2\r\n\r\n"]).unwrap();
        assert!(done);
    }

    #[test]
    fn refuses_ambiguous_framing() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"4\nWiki\r\n",
            b"4\r\nWikiX\r\n",
            b"4\r\nWiki\n0\r\n\r\n",
            b"ffffffffffffffffff\r\n",
            b"-1\r\n",
            b"0\r\n\n",
            b" 4\r\n",
            b"4 x\r\n",
            b"0\r\nX: a\r\n b\r\n\r\n",
            b"0\r\nGET / HTTP/1.1\r\n\r\n",
            b"0\r\nX : a\r\n\r\n",
            b"0\r\nContent-Length: 5\r\n\r\n",
            b"0\r\ntransfer-encoding: chunked\r\n\r\n",
            b"0\r\nX: a\x01\r\n\r\n",
            b"0\r\nX: a\nY: b\r\n\r\n",
        ] {
            assert!(decode(&[bad]).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
