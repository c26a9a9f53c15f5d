//! Newline-delimited framing for the stdio transport.

/// One item out of the framer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line without its terminator.
    Line(&'a [u8]),
    /// A line longer than the limit, dropped; `size` is its full length, `head` its first
    /// [`HEAD`] bytes (enough to tell what it was, e.g. the id of a JSON-RPC reply).
    TooLarge {
        size: usize,
        limit: usize,
        head: &'a [u8],
    },
}

/// Bytes of an oversized line kept for its [`Frame::TooLarge`] report.
pub const HEAD: usize = 256;

/// Splits a byte stream at LF. One CR before the LF is dropped, empty lines are skipped, and a
/// line over `max_size` bytes is dropped (and reported) without being buffered whole.
#[derive(Debug)]
pub struct LineFramer {
    max_size: usize,
    buf: Vec<u8>,
    /// Bytes of an oversized line seen so far, while discarding it (`buf` then holds its head).
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
        if self.discarding.is_some() {
            0
        } else {
            self.buf.len()
        }
    }

    /// While an oversized line is being discarded (its end not seen yet): its bytes so far and
    /// its head, so a reader can act on it before the line ends.
    pub fn discarding(&self) -> Option<(usize, &[u8])> {
        self.discarding.map(|seen| (seen, &self.buf[..]))
    }

    /// Top up the head of the line being discarded.
    fn keep_head(&mut self, data: &[u8]) {
        let room = HEAD.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&data[..room.min(data.len())]);
    }

    fn emit_line<'a>(max: usize, line: &'a [u8], emit: &mut impl FnMut(Frame<'a>)) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > max {
            emit(Frame::TooLarge {
                size: line.len(),
                limit: max,
                head: &line[..HEAD.min(line.len())],
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
                self.keep_head(seg);
                emit(Frame::TooLarge {
                    size,
                    limit: self.max_size,
                    head: &self.buf,
                });
                self.buf.clear();
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
            self.keep_head(rest);
        } else if self.buf.len() + rest.len() > self.max_size + 1
            || (self.buf.len() + rest.len() == self.max_size + 1 && !self.last_cr)
        {
            // Longer than any line we may keep, even with a CR to strip: stop buffering it.
            self.discarding = Some(self.buf.len() + rest.len());
            self.buf.truncate(HEAD);
            self.keep_head(rest);
            self.buf.shrink_to(HEAD);
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
                head: &self.buf,
            });
            self.buf.clear();
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
    fn oversize_reports_its_head_at_every_split() {
        let big: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut stream = b"ok\n".to_vec();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\r\nnext\n");
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            let mut f = LineFramer::new(100);
            let mut heads = Vec::new();
            let mut lines = Vec::new();
            let mut during = None;
            for chunk in [a, b] {
                f.feed(chunk, |fr| match fr {
                    Frame::Line(l) => lines.push(l.to_vec()),
                    Frame::TooLarge { size, head, .. } => heads.push((size, head.to_vec())),
                });
                if let Some((seen, head)) = f.discarding() {
                    during = Some((seen, head.to_vec()));
                }
            }
            assert_eq!(heads, vec![(1000, big[..HEAD].to_vec())], "cut at {cut}");
            assert_eq!(
                lines,
                vec![b"ok".to_vec(), b"next".to_vec()],
                "cut at {cut}"
            );
            assert_eq!(f.buffered(), 0);
            // cut inside the long line past the limit: the framer says so before the line ends
            if (3 + 101..3 + 1000).contains(&cut) {
                let (seen, head) = during.expect("discarding");
                assert_eq!(seen, cut - 3, "cut at {cut}");
                assert_eq!(head, big[..HEAD.min(seen)].to_vec(), "cut at {cut}");
            }
        }
        // a line over the limit but shorter than HEAD: all of it; at close: the unterminated tail
        let mut f = LineFramer::new(3);
        let mut out = Vec::new();
        f.feed(b"abcdef", |_| {});
        f.close(|fr| {
            if let Frame::TooLarge { size, head, .. } = fr {
                out.push((size, head.to_vec()));
            }
        });
        assert_eq!(out, vec![(6, b"abcdef".to_vec())]);
    }

    #[test]
    fn exact_limit_with_cr_is_kept() {
        assert_eq!(run(3, &[b"abc\r", b"\n"]), vec![Out::L(b"abc".to_vec())]);
        assert_eq!(run(3, &[b"abcd", b"\r\n"]), vec![Out::Big(4)]);
    }
}
