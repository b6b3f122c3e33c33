//! A streaming validator/decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1).
//!
//! The proxy forwards chunked bodies as they are, so the decoder's main job is to find where the body
//! ends and to refuse framing that two parsers could read differently (bare LF, bad sizes, overflow):
//! that is how requests get smuggled. For an HTTP/1.0 client it also reports the data ranges, so the
//! proxy can strip the framing.

/// Why a chunked body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Ext,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    EndLf,
    Done,
}

/// Longest trailer section accepted.
const MAX_TRAILERS: usize = 8 * 1024;
/// Longest chunk extension accepted.
const MAX_EXT: usize = 1024;

pub struct ChunkedDecoder {
    state: State,
    digits: u8,
    remaining: u64,
    side_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder { state: State::Size, digits: 0, remaining: 0, side_bytes: 0 }
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
                    b';' | b' ' | b'\t' if self.digits > 0 => {
                        self.state = State::Ext;
                        self.side_bytes = 0;
                    }
                    b'\r' if self.digits > 0 => self.state = State::SizeLf,
                    _ => return Err(ChunkError("invalid chunk size")),
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
                State::TrailerStart => {
                    self.state = if b == b'\r' { State::EndLf } else { State::TrailerLine };
                    if self.state == State::TrailerLine {
                        continue;
                    }
                }
                State::TrailerLine => {
                    self.side_bytes += 1;
                    if self.side_bytes > MAX_TRAILERS {
                        return Err(ChunkError("trailer section too large"));
                    }
                    match b {
                        b'\r' => self.state = State::TrailerLf,
                        b'\n' => return Err(ChunkError("bare LF in trailer")),
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
        ] {
            assert!(decode(&[bad]).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
