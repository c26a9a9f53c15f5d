//! Server-sent events: an encoder and an incremental decoder that follows the WHATWG
//! event-stream parsing rules.

/// Appends one event: `id`, `event`, `retry` fields, then one `data:` line per line of data.
pub fn encode_event(
    out: &mut Vec<u8>,
    data: &[u8],
    id: Option<&str>,
    event: Option<&str>,
    retry: Option<u64>,
) {
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.push(b'\n');
    }
    if let Some(retry) = retry {
        out.extend_from_slice(b"retry: ");
        out.extend_from_slice(itoa::Buffer::new().format(retry).as_bytes());
        out.push(b'\n');
    }
    for line in split_lines(data) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// Appends a comment block (a keep-alive): each line as `: line`, `:` alone for empty text.
pub fn encode_comment(out: &mut Vec<u8>, text: &[u8]) {
    if text.is_empty() {
        out.extend_from_slice(b":\n\n");
        return;
    }
    for line in split_lines(text) {
        if line.is_empty() {
            out.extend_from_slice(b":\n");
        } else {
            out.extend_from_slice(b": ");
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out.push(b'\n');
}

/// Splits at CRLF, CR or LF; empty input is one empty line.
pub fn split_lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let cur = rest?;
        match memchr::memchr2(b'\r', b'\n', cur) {
            None => {
                rest = None;
                Some(cur)
            }
            Some(i) => {
                let skip = if cur[i] == b'\r' && cur.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = Some(&cur[i + skip..]);
                Some(&cur[..i])
            }
        }
    })
}

/// Whether a value is valid for an `id` (no CR, LF, NUL) or `event` (no CR, LF) field.
pub fn field_ok(value: &str, allow_nul: bool) -> bool {
    !value
        .bytes()
        .any(|b| b == b'\r' || b == b'\n' || (!allow_nul && b == 0))
}

/// One item out of the decoder.
#[derive(Debug, PartialEq, Eq)]
pub enum SseItem<'a> {
    Event {
        event: &'a str,
        data: &'a str,
        id: &'a str,
        retry: Option<u64>,
    },
    TooLarge {
        size: usize,
        limit: usize,
    },
}

/// UTF-8 with replacement, as WHATWG decodes the stream; valid text (the common case) is
/// checked by the fast validator and borrowed.
fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental `text/event-stream` parser.
#[derive(Debug)]
pub struct SseDecoder {
    max_event_size: usize,
    /// Bytes of an incomplete line.
    line: Vec<u8>,
    data: String,
    event_type: String,
    last_id: String,
    retry: Option<u64>,
    block_retry: Option<u64>,
    /// Bytes of the current block's complete lines.
    block_bytes: usize,
    discarding: bool,
    /// While discarding: part of a line has been counted and its end has not arrived.
    discard_partial: bool,
    /// Bytes of the stream seen, up to the BOM's length (to skip one BOM at the start).
    bom_seen: usize,
    /// The previous chunk ended with CR: an LF opening the next one belongs to it.
    pending_cr: bool,
}

impl SseDecoder {
    pub fn new(max_event_size: usize) -> Self {
        SseDecoder {
            max_event_size,
            line: Vec::new(),
            data: String::new(),
            event_type: String::new(),
            last_id: String::new(),
            retry: None,
            block_retry: None,
            block_bytes: 0,
            discarding: false,
            discard_partial: false,
            bom_seen: 0,
            pending_cr: false,
        }
    }

    pub fn last_event_id(&self) -> &str {
        &self.last_id
    }

    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    pub fn max_event_size(&self) -> usize {
        self.max_event_size
    }

    /// Feeds a chunk; dispatched events and oversize reports go to `emit`.
    pub fn feed<F: FnMut(SseItem<'_>)>(&mut self, data: &[u8], mut emit: F) {
        if data.is_empty() {
            return;
        }
        let mut rest = data;
        if self.bom_seen < BOM.len() {
            // Match the stream's first bytes against the BOM, across chunks.
            let n = (BOM.len() - self.bom_seen).min(rest.len());
            if rest[..n] == BOM[self.bom_seen..self.bom_seen + n] {
                self.bom_seen += n;
                rest = &rest[n..];
            } else {
                let held = self.bom_seen;
                self.bom_seen = BOM.len();
                if held > 0 {
                    self.feed_lines(&BOM[..held], &mut emit);
                }
            }
        }
        self.feed_lines(rest, &mut emit);
    }

    fn feed_lines<F: FnMut(SseItem<'_>)>(&mut self, data: &[u8], emit: &mut F) {
        let mut rest = data;
        if self.pending_cr {
            self.pending_cr = false;
            if rest.first() == Some(&b'\n') {
                rest = &rest[1..];
            }
        }
        while let Some(i) = memchr::memchr2(b'\r', b'\n', rest) {
            let seg = &rest[..i];
            if rest[i] == b'\r' {
                match rest.get(i + 1) {
                    Some(b'\n') => rest = &rest[i + 2..],
                    Some(_) => rest = &rest[i + 1..],
                    None => {
                        self.pending_cr = true;
                        rest = &rest[i + 1..];
                    }
                }
            } else {
                rest = &rest[i + 1..];
            }
            if self.discarding {
                let empty = !self.discard_partial && seg.is_empty();
                self.discard_partial = false;
                if empty {
                    emit(SseItem::TooLarge {
                        size: self.block_bytes,
                        limit: self.max_event_size,
                    });
                    self.discarding = false;
                    self.reset_block();
                } else {
                    self.block_bytes += seg.len();
                }
            } else if self.line.is_empty() {
                self.line_done(seg, emit);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(seg);
                self.line_done(&line, emit);
                line.clear();
                self.line = line;
            }
        }
        if !rest.is_empty() {
            self.partial(rest);
        }
    }

    /// Bytes of a line whose end has not arrived.
    fn partial(&mut self, bytes: &[u8]) {
        if self.discarding {
            self.block_bytes += bytes.len();
            self.discard_partial = true;
            return;
        }
        if self.block_bytes + self.line.len() + bytes.len() > self.max_event_size {
            self.block_bytes += self.line.len() + bytes.len();
            self.line.clear();
            self.enter_discard();
            self.discard_partial = true;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn enter_discard(&mut self) {
        self.discarding = true;
        self.data.clear();
        self.event_type.clear();
    }

    /// A complete line, outside discard mode.
    fn line_done<F: FnMut(SseItem<'_>)>(&mut self, line: &[u8], emit: &mut F) {
        if line.is_empty() {
            self.dispatch(emit);
            return;
        }
        self.block_bytes += line.len();
        if self.block_bytes > self.max_event_size {
            self.enter_discard();
            return;
        }
        self.field(line);
    }

    fn field(&mut self, line: &[u8]) {
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                self.data.push_str(&lossy(value));
                self.data.push('\n');
            }
            b"event" => {
                // Reuse the buffers: no allocation per event once they have grown.
                self.event_type.clear();
                self.event_type.push_str(&lossy(value));
            }
            b"id" if memchr::memchr(0, value).is_none() => {
                self.last_id.clear();
                self.last_id.push_str(&lossy(value));
            }
            b"retry"
                if !value.is_empty()
                    && value.len() <= 20
                    && value.iter().all(u8::is_ascii_digit) =>
            {
                if let Some(v) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    self.retry = Some(v);
                    self.block_retry = Some(v);
                }
            }
            _ => {}
        }
    }

    fn reset_block(&mut self) {
        self.data.clear();
        self.event_type.clear();
        self.block_retry = None;
        self.block_bytes = 0;
    }

    fn dispatch<F: FnMut(SseItem<'_>)>(&mut self, emit: &mut F) {
        if !self.data.is_empty() {
            let data = self.data.strip_suffix('\n').unwrap_or(&self.data);
            let event = if self.event_type.is_empty() {
                "message"
            } else {
                &self.event_type
            };
            emit(SseItem::Event {
                event,
                data,
                id: &self.last_id,
                retry: self.block_retry,
            });
        }
        self.reset_block();
    }

    /// End of stream: an incomplete block is discarded, an oversized one reported.
    pub fn close<F: FnMut(SseItem<'_>)>(&mut self, mut emit: F) {
        if self.discarding {
            emit(SseItem::TooLarge {
                size: self.block_bytes,
                limit: self.max_event_size,
            });
        }
        self.line.clear();
        self.discarding = false;
        self.discard_partial = false;
        self.reset_block();
        self.pending_cr = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Out {
        E(String, String, String, Option<u64>),
        Big(usize),
    }

    fn run(max: usize, chunks: &[&[u8]]) -> Vec<Out> {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        let mut push = |it: SseItem<'_>| match it {
            SseItem::Event {
                event,
                data,
                id,
                retry,
            } => out.push(Out::E(event.into(), data.into(), id.into(), retry)),
            SseItem::TooLarge { size, .. } => out.push(Out::Big(size)),
        };
        for c in chunks {
            d.feed(c, &mut push);
        }
        d.close(&mut push);
        out
    }

    fn e(event: &str, data: &str, id: &str, retry: Option<u64>) -> Out {
        Out::E(event.into(), data.into(), id.into(), retry)
    }

    #[test]
    fn whatwg_basics_at_every_split() {
        let stream: &[u8] = b"\xEF\xBB\xBF: hi\r\nid: 1\rdata: a\r\ndata:b\n\nevent: x\ndata\nretry: 30\n\nid: a\x00b\ndata: c\n\n";
        let want = vec![
            e("message", "a\nb", "1", None),
            e("x", "", "1", Some(30)),
            e("message", "c", "1", None),
        ];
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(run(1 << 20, &[a, b]), want, "cut at {cut}");
        }
    }

    #[test]
    fn no_data_no_dispatch_and_bad_retry() {
        assert_eq!(
            run(100, &[b"id: 7\n\nretry: 1x\ndata: z\n\n"]),
            vec![e("message", "z", "7", None)]
        );
    }

    #[test]
    fn oversized_block_dropped_and_resynced() {
        let stream: &[u8] = b"data: ok\n\ndata: 0123456789\ndata: more\n\ndata: next\n\n";
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(
                run(12, &[a, b]),
                vec![
                    e("message", "ok", "", None),
                    Out::Big(26),
                    e("message", "next", "", None)
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn encoder_round_trip() {
        let mut out = Vec::new();
        encode_event(&mut out, b"l1\r\nl2\rl3", Some("9"), Some("m"), Some(5));
        encode_comment(&mut out, b"");
        assert_eq!(
            out,
            b"id: 9\nevent: m\nretry: 5\ndata: l1\ndata: l2\ndata: l3\n\n:\n\n"
        );
        assert_eq!(run(1000, &[&out]), vec![e("m", "l1\nl2\nl3", "9", Some(5))]);
    }
}
