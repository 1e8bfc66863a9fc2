//! A job's log from the engine's live tail (`/api/jobs/{id}/logs/tail`, a
//! WebSocket of text chunks). The tail sends the log from its first byte on
//! every connect, so the cursor is ours: a [`Cursor`] counts what was taken
//! and skips it when the tail is opened again.

use std::sync::Mutex;

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::client::{EngineError, RayClient};
use crate::sync::lock;

/// The tail's read buffer (tungstenite's default is 128 KiB).
const READ_BUFFER_BYTES: usize = 4 << 10;

/// How much of a job's log was taken: the bytes of the engine's text, as
/// every connect of its tail sends them again from the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Bytes taken so far.
    pub taken: u64,
}

impl Cursor {
    /// A cursor past the first `taken` bytes (a job taken on again after a
    /// restart).
    pub fn at(taken: u64) -> Cursor {
        Cursor { taken }
    }

    /// The part of a chunk that lies past the cursor, where `seen` is how far
    /// into the log this connection's chunks before it reached; moves the
    /// cursor past it and `seen` past the chunk.
    pub fn take<'a>(&mut self, seen: &mut u64, chunk: &'a [u8]) -> &'a [u8] {
        let start = *seen;
        *seen += chunk.len() as u64;
        if *seen <= self.taken {
            return &[];
        }
        // The cursor lies in this chunk (or before it, when the engine's log
        // got shorter: a new connect that sends less than was taken).
        let skip = usize::try_from(self.taken.saturating_sub(start)).unwrap_or(usize::MAX);
        self.taken = *seen;
        &chunk[skip.min(chunk.len())..]
    }
}

/// How one opening of the tail ended.
#[derive(Debug)]
pub enum Closed {
    /// The engine closed it (after a job's end, or when it chose to: its
    /// status says which).
    ByEngine,
    /// It broke, or could not open.
    Broken(EngineError),
}

/// Follows a job's tail once, from its start, handing `sink` each part past
/// `cursor` as it arrives, until the tail closes. Answers whether any new
/// bytes came, and how it closed.
///
/// The cursor is held while a part is taken and sunk, so whoever else takes
/// from it (the last read of the whole log at the job's end) sees each byte
/// either taken and sunk, or neither.
pub async fn follow(
    client: &RayClient,
    id: &str,
    cursor: &Mutex<Cursor>,
    mut sink: impl FnMut(&[u8]),
) -> (bool, Closed) {
    let request = match client.tail_request(id) {
        Ok(request) => request,
        Err(e) => return (false, Closed::Broken(e)),
    };
    // A tail's chunks are small (at most ten lines a second): a small read
    // buffer keeps a hundred open tails from costing 128 KiB each.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0);
    let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    let mut socket = match connect.await {
        Ok((socket, _)) => socket,
        Err(e) => return (false, Closed::Broken(client.tail_error(&e))),
    };
    let mut seen = 0;
    let mut any = false;
    while let Some(message) = socket.next().await {
        let chunk = match message {
            Ok(Message::Text(text)) => text.as_bytes().to_vec(),
            Ok(Message::Binary(bytes)) => bytes.to_vec(),
            Ok(Message::Close(_)) => return (any, Closed::ByEngine),
            // Pings are answered by the socket itself.
            Ok(_) => continue,
            Err(e) => return (any, Closed::Broken(client.tail_error(&e))),
        };
        let mut cursor = lock(cursor);
        let new = cursor.take(&mut seen, &chunk);
        if !new.is_empty() {
            any = true;
            sink(new);
        }
    }
    (any, Closed::ByEngine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_opened_again_skips_what_was_taken() {
        let mut cursor = Cursor::default();
        let mut seen = 0;
        assert_eq!(cursor.take(&mut seen, b"hello "), b"hello ");
        assert_eq!(cursor.take(&mut seen, b"wor"), b"wor");
        // The tail opens again and sends it all from the start, chunked
        // otherwise.
        let mut seen = 0;
        assert_eq!(cursor.take(&mut seen, b"hel"), b"");
        assert_eq!(cursor.take(&mut seen, b"lo world\n"), b"ld\n");
        assert_eq!(cursor.taken, 12);
        assert_eq!(cursor.take(&mut seen, b"more"), b"more");
    }

    #[test]
    fn a_cursor_taken_on_again_starts_where_it_was() {
        let mut cursor = Cursor::at(4);
        let mut seen = 0;
        assert_eq!(cursor.take(&mut seen, b"abcdef"), b"ef");
    }
}
