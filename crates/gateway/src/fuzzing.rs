//! The client wire's parsers, opened to the fuzzers in `fuzz/` (and nothing else): hidden
//! from the docs, no stability promised. Each function is the real code path, not a copy.

use crate::frame;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::sync::mpsc;

pub use crate::frame::{ReadEnd, STANDARD_METHODS, Verdict, judge, leading_id};

/// What the stdio reader made of a whole client stream.
#[derive(Debug)]
pub struct Stream {
    /// The messages handed to rmcp, in order.
    pub passed: Vec<ClientJsonRpcMessage>,
    /// The refusals written back to the client, in order.
    pub replies: Vec<ServerJsonRpcMessage>,
    /// How the stream ended.
    pub end: ReadEnd,
}

/// Run the stdio frame reader over `input`, delivered in reads of at most `chunk` bytes
/// (at least one), with a line limit of `max_bytes`.
pub fn read_stream(input: &[u8], chunk: usize, max_bytes: usize) -> Stream {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
    }
    // Room for every line's message and refusal, so the reader never waits on a full queue.
    let room = input.len() + 2;
    let (service_tx, mut service_rx) = mpsc::channel(room);
    let (reply_tx, mut reply_rx) = mpsc::channel(room);
    let reader = tokio::io::BufReader::with_capacity(chunk.max(1), input);
    let end = RUNTIME.with(|runtime| runtime.block_on(frame::read_frames(reader, max_bytes, service_tx, reply_tx)));
    let mut passed = Vec::new();
    while let Ok(message) = service_rx.try_recv() {
        passed.push(message);
    }
    let mut replies = Vec::new();
    while let Ok(message) = reply_rx.try_recv() {
        replies.push(message);
    }
    Stream { passed, replies, end }
}

/// One message exactly as the stdio writer puts it on the client's stdout (without the
/// newline).
pub fn encode(message: &ServerJsonRpcMessage) -> serde_json::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    frame::encode(&mut bytes, message)?;
    Ok(bytes)
}
