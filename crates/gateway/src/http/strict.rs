//! What hyper's HTTP/1.1 parser accepts and the listener does not: a request head with a
//! line ending in a bare LF (hyper, like `httparse`, takes `\n` for `\r\n`), and a request
//! with more than one `Host` header. A proxy in front that reads either differently would
//! see another request than the server does (request smuggling, a second host); both are
//! answered 400 and the connection closed.
//!
//! hyper keeps no trace of the line endings it read, so the connection's bytes are watched
//! on their way in ([`Watched`]) by [`Framing`], a pure state machine that follows HTTP/1.1
//! framing — heads, `Content-Length` bodies, chunked bodies and their trailers — and looks
//! for a bare LF only where a line ends (a body may hold any byte). What it sees is one
//! flag per connection, read by the service before the request is routed ([`refusal`]).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A request head longer than this is no longer followed (hyper refuses far shorter ones).
const MAX_HEAD: usize = 1024 * 1024;

/// Where the connection's input is, in HTTP/1.1 framing terms.
#[derive(Debug)]
enum State {
    /// In a request head, its bytes so far (a line end without its CR is a bare LF).
    Head(Vec<u8>),
    /// In a body of this many more bytes.
    Body(u64),
    /// In a chunk-size line, its bytes so far.
    ChunkSize(Vec<u8>),
    /// In a chunk's data, this many more bytes, then its line end.
    ChunkData(u64),
    /// After a chunk's data: its CRLF.
    ChunkEnd { cr: bool },
    /// In the trailer section, at the start of a line or not, after a CR or not.
    Trailer { line_start: bool, cr: bool },
    /// Not followed any more: a bare LF was seen (the request is refused and the connection
    /// closed) or the input is something hyper will refuse itself.
    Lost,
}

/// The framing follower of one connection's input.
#[derive(Debug)]
pub(super) struct Framing {
    state: State,
    bare_lf: bool,
}

impl Default for Framing {
    fn default() -> Self {
        Self { state: State::Head(Vec::new()), bare_lf: false }
    }
}

impl Framing {
    /// Whether a bare LF ended a line of a head, chunk line or trailer so far.
    pub(super) fn bare_lf(&self) -> bool {
        self.bare_lf
    }

    /// Follow `bytes`, the next input of the connection.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (used, next) = match &mut self.state {
                State::Lost => return,
                State::Body(left) => {
                    let used = usize::try_from(*left).unwrap_or(usize::MAX).min(bytes.len());
                    *left -= used as u64;
                    (used, (*left == 0).then(|| State::Head(Vec::new())))
                }
                State::ChunkData(left) => {
                    let used = usize::try_from(*left).unwrap_or(usize::MAX).min(bytes.len());
                    *left -= used as u64;
                    (used, (*left == 0).then_some(State::ChunkEnd { cr: false }))
                }
                State::Head(head) => {
                    let b = bytes[0];
                    if b == b'\n' && head.last() != Some(&b'\r') {
                        self.bare_lf = true;
                        (1, Some(State::Lost))
                    } else if head.len() >= MAX_HEAD {
                        (1, Some(State::Lost))
                    } else {
                        head.push(b);
                        // Empty lines before a request line are skipped, as hyper does.
                        if head.as_slice() == b"\r\n" {
                            head.clear();
                        }
                        let next = head.ends_with(b"\r\n\r\n").then(|| after_head(head));
                        (1, next)
                    }
                }
                State::ChunkSize(line) => {
                    let b = bytes[0];
                    if b == b'\n' {
                        if line.last() != Some(&b'\r') {
                            self.bare_lf = true;
                            (1, Some(State::Lost))
                        } else {
                            (1, Some(after_chunk_size(line)))
                        }
                    } else if line.len() >= 1024 {
                        (1, Some(State::Lost))
                    } else {
                        line.push(b);
                        (1, None)
                    }
                }
                State::ChunkEnd { cr } => match (bytes[0], *cr) {
                    (b'\r', false) => (1, Some(State::ChunkEnd { cr: true })),
                    (b'\n', true) => (1, Some(State::ChunkSize(Vec::new()))),
                    (b'\n', false) => {
                        self.bare_lf = true;
                        (1, Some(State::Lost))
                    }
                    _ => (1, Some(State::Lost)),
                },
                State::Trailer { line_start, cr } => match bytes[0] {
                    b'\n' if !*cr => {
                        self.bare_lf = true;
                        (1, Some(State::Lost))
                    }
                    b'\n' if *line_start => (1, Some(State::Head(Vec::new()))),
                    b'\n' => (1, Some(State::Trailer { line_start: true, cr: false })),
                    b'\r' => (1, Some(State::Trailer { line_start: *line_start, cr: true })),
                    _ => (1, Some(State::Trailer { line_start: false, cr: false })),
                },
            };
            bytes = &bytes[used..];
            if let Some(next) = next {
                self.state = next;
            }
        }
    }
}

/// What follows a complete head (CRLF line ends only): its body by `Transfer-Encoding` and
/// `Content-Length`, as hyper frames it; a head hyper will refuse is not followed further.
fn after_head(head: &[u8]) -> State {
    let Ok(text) = std::str::from_utf8(head) else { return State::Lost };
    let mut chunked = false;
    let mut length: Option<u64> = None;
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            if !chunked {
                return State::Lost;
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            match (value.parse::<u64>(), length) {
                (Ok(n), None) => length = Some(n),
                (Ok(n), Some(m)) if n == m => {}
                _ => return State::Lost,
            }
        }
    }
    match (chunked, length) {
        (true, _) => State::ChunkSize(Vec::new()),
        (false, Some(n)) if n > 0 => State::Body(n),
        _ => State::Head(Vec::new()),
    }
}

/// What follows a chunk-size line (its CRLF included).
fn after_chunk_size(line: &[u8]) -> State {
    let text = std::str::from_utf8(line).unwrap_or("");
    let size = text.trim_end_matches('\r').split(';').next().unwrap_or("").trim();
    match u64::from_str_radix(size, 16) {
        Ok(0) => State::Trailer { line_start: true, cr: false },
        Ok(n) => State::ChunkData(n),
        Err(_) => State::Lost,
    }
}

/// A connection's stream, its input followed by [`Framing`]; `flag` is raised on a bare LF.
pub(super) struct Watched<S> {
    inner: S,
    framing: Framing,
    flag: Arc<AtomicBool>,
}

impl<S> Watched<S> {
    pub(super) fn new(inner: S, flag: Arc<AtomicBool>) -> Self {
        Self { inner, framing: Framing::default(), flag }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let this = &mut *self;
            this.framing.feed(&buf.filled()[before..]);
            if this.framing.bare_lf() {
                this.flag.store(true, Ordering::Release);
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Why a request is refused before it is routed, if it is: a bare LF on its connection, or
/// more than one `Host`. Pure.
pub(super) fn refusal(headers: &HeaderMap, bare_lf: bool) -> Option<&'static str> {
    if bare_lf {
        return Some("a line of the request ends in a bare LF: HTTP/1.1 lines end in CRLF");
    }
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Some("the request has more than one Host header");
    }
    None
}

/// The 400 a refused request gets; the connection is closed after it.
pub(super) fn bad_request(why: &str) -> Response {
    let mut response = Response::new(Body::from(format!("Bad Request: {why}\n")));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare_lf_in(input: &[u8]) -> bool {
        // Every split of the input into two reads gives the same answer.
        let whole = {
            let mut f = Framing::default();
            f.feed(input);
            f.bare_lf()
        };
        for cut in 0..input.len() {
            let mut f = Framing::default();
            f.feed(&input[..cut]);
            f.feed(&input[cut..]);
            assert_eq!(f.bare_lf(), whole, "split at {cut}");
        }
        whole
    }

    #[test]
    fn crlf_heads_and_any_body_pass() {
        assert!(!bare_lf_in(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(!bare_lf_in(
            b"\r\nPOST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n{\n\n}GET / HTTP/1.1\r\n\r\n"
        ));
        assert!(!bare_lf_in(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n\n\n\n\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        ));
    }

    #[test]
    fn a_bare_lf_where_a_line_ends_is_seen() {
        assert!(bare_lf_in(b"GET / HTTP/1.1\nHost: a\r\n\r\n"));
        assert!(bare_lf_in(b"GET / HTTP/1.1\r\nHost: a\n\r\n"));
        assert!(bare_lf_in(b"GET / HTTP/1.1\r\nHost: a\r\n\n"));
        // In the next head, after a body holding LFs.
        assert!(bare_lf_in(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\n\nGET / HTTP/1.1\nHost: a\r\n\r\n"));
        // In a chunk-size line, after a chunk, in a trailer.
        assert!(bare_lf_in(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"));
        assert!(bare_lf_in(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n"));
        assert!(bare_lf_in(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\n\r\n"));
    }

    #[test]
    fn two_hosts_or_a_bare_lf_are_refused() {
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("127.0.0.1:1"));
        assert_eq!(refusal(&headers, false), None);
        assert!(refusal(&headers, true).unwrap().contains("bare LF"));
        headers.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert!(refusal(&headers, false).unwrap().contains("more than one Host"));
    }
}
