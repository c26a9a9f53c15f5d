//! Newline-delimited framing for the stdio transport.

/// One item out of the framer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line without its terminator.
    Line(&'a [u8]),
    /// A line longer than the limit, dropped; `size` is its full length.
    TooLarge { size: usize, limit: usize },
}

/// Splits a byte stream at LF. One CR before the LF is dropped, empty lines are skipped, and a
/// line over `max_size` bytes is dropped (and reported) without being buffered whole.
#[derive(Debug)]
pub struct LineFramer {
    max_size: usize,
    buf: Vec<u8>,
    /// Bytes of an oversized line seen so far, while discarding it.
    discarding: Option<usize>,
    last_cr: bool,
}

impl LineFramer {
    pub fn new(max_size: usize) -> Self {
        LineFramer {
            max_size,
            buf: Vec::new(),
            discarding: None,
            last_cr: false,
        }
    }

    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Bytes held for the incomplete line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn emit_line<'a>(max: usize, line: &'a [u8], emit: &mut impl FnMut(Frame<'a>)) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > max {
            emit(Frame::TooLarge {
                size: line.len(),
                limit: max,
            });
        } else if !line.is_empty() {
            emit(Frame::Line(line));
        }
    }

    /// Feeds a chunk; complete lines and oversize reports go to `emit`, in order.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, data: &[u8], mut emit: F) {
        let mut rest = data;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let seg = &rest[..nl];
            if let Some(seen) = self.discarding.take() {
                let cr = if seg.is_empty() {
                    self.last_cr
                } else {
                    seg.last() == Some(&b'\r')
                };
                let size = seen + seg.len() - usize::from(cr);
                emit(Frame::TooLarge {
                    size,
                    limit: self.max_size,
                });
            } else if self.buf.is_empty() {
                Self::emit_line(self.max_size, seg, &mut emit);
            } else {
                self.buf.extend_from_slice(seg);
                let line = std::mem::take(&mut self.buf);
                Self::emit_line(self.max_size, &line, &mut emit);
                self.buf = line;
                self.buf.clear();
            }
            self.last_cr = false;
            rest = &rest[nl + 1..];
        }
        if rest.is_empty() {
            return;
        }
        self.last_cr = rest.last() == Some(&b'\r');
        if let Some(seen) = self.discarding.as_mut() {
            *seen += rest.len();
        } else if self.buf.len() + rest.len() > self.max_size + 1
            || (self.buf.len() + rest.len() == self.max_size + 1 && !self.last_cr)
        {
            // Longer than any line we may keep, even with a CR to strip: stop buffering it.
            self.discarding = Some(self.buf.len() + rest.len());
            self.buf = Vec::new();
        } else {
            self.buf.extend_from_slice(rest);
        }
    }

    /// End of stream: the unterminated tail, if any. The framer is reset.
    pub fn close<F: FnMut(Frame<'_>)>(&mut self, mut emit: F) {
        if let Some(seen) = self.discarding.take() {
            emit(Frame::TooLarge {
                size: seen - usize::from(self.last_cr),
                limit: self.max_size,
            });
        } else {
            let line = std::mem::take(&mut self.buf);
            Self::emit_line(self.max_size, &line, &mut emit);
        }
        self.last_cr = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Out {
        L(Vec<u8>),
        Big(usize),
    }

    fn run(max: usize, chunks: &[&[u8]]) -> Vec<Out> {
        let mut f = LineFramer::new(max);
        let mut out = Vec::new();
        let mut push = |fr: Frame<'_>| match fr {
            Frame::Line(l) => out.push(Out::L(l.to_vec())),
            Frame::TooLarge { size, .. } => out.push(Out::Big(size)),
        };
        for c in chunks {
            f.feed(c, &mut push);
        }
        f.close(&mut push);
        out
    }

    #[test]
    fn lines_crlf_and_tail() {
        assert_eq!(
            run(100, &[b"a\r\nb", b"c\n\n\r\nd"]),
            vec![
                Out::L(b"a".to_vec()),
                Out::L(b"bc".to_vec()),
                Out::L(b"d".to_vec())
            ]
        );
    }

    #[test]
    fn oversize_resyncs_at_every_split() {
        let stream = b"ok\r\n0123456789abc\r\nnext\n";
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(
                run(5, &[a, b]),
                vec![
                    Out::L(b"ok".to_vec()),
                    Out::Big(13),
                    Out::L(b"next".to_vec())
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn exact_limit_with_cr_is_kept() {
        assert_eq!(run(3, &[b"abc\r", b"\n"]), vec![Out::L(b"abc".to_vec())]);
        assert_eq!(run(3, &[b"abcd", b"\r\n"]), vec![Out::Big(4)]);
    }
}
