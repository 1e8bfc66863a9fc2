//! Bounded views of a job's whole output: all of it when it is short, otherwise
//! its first and last bytes and a count of what lies between.
//!
//! A finished job's output can be far larger than any guest call may hold (a
//! shell job spills up to 64 MiB per stream), so the host never copies more than
//! was asked for, and never more than [`MAX_EXCERPT_PART`] per part. The cuts
//! are the host's: each part is cut back to a character boundary, and invalid
//! UTF-8 is replaced by U+FFFD within the part's byte budget, so the guest only
//! composes what it receives.

/// The most bytes the host returns for the whole output or for either end.
pub const MAX_EXCERPT_PART: u64 = 4 << 20;

/// Which part of a job's whole output to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExcerptWindow {
    /// Output of at most this many bytes comes back whole.
    pub whole_up_to: u64,
    /// Otherwise at most this many bytes from the start...
    pub head_bytes: u64,
    /// ...and at most this many from the end.
    pub tail_bytes: u64,
}

impl ExcerptWindow {
    /// The window held to [`MAX_EXCERPT_PART`] per part.
    pub fn clamped(self) -> ExcerptWindow {
        ExcerptWindow {
            whole_up_to: self.whole_up_to.min(MAX_EXCERPT_PART),
            head_bytes: self.head_bytes.min(MAX_EXCERPT_PART),
            tail_bytes: self.tail_bytes.min(MAX_EXCERPT_PART),
        }
    }
}

/// A job's whole output, or its two ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Excerpt {
    /// The output from its first byte: all of it when nothing was omitted.
    pub head: String,
    /// The output's last bytes, when the middle was left out.
    pub tail: String,
    /// Bytes of the output as written that lie between `head` and `tail`.
    pub omitted_bytes: u64,
}

/// One stretch of a job's output, of which only some bytes may still be held.
pub trait Segment {
    /// Bytes the stretch has.
    fn total_bytes(&self) -> u64;
    /// How many of its first bytes can still be read.
    fn held_from_start(&self) -> u64;
    /// How many of its last bytes can still be read.
    fn held_from_end(&self) -> u64;
    /// Bytes `from..to`, which lie within what is held.
    fn bytes(&self, from: u64, to: u64) -> Vec<u8>;
}

impl Segment for &[u8] {
    fn total_bytes(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn held_from_start(&self) -> u64 {
        Segment::total_bytes(self)
    }

    fn held_from_end(&self) -> u64 {
        Segment::total_bytes(self)
    }

    fn bytes(&self, from: u64, to: u64) -> Vec<u8> {
        self[from as usize..to as usize].to_vec()
    }
}

/// The excerpt of `text`.
pub fn text_excerpt(text: &str, window: ExcerptWindow) -> Excerpt {
    excerpt(&[&text.as_bytes()], window)
}

/// The excerpt of the output made of `segments` in order. Bytes a segment no
/// longer holds end the head (or the tail) there and count as omitted.
pub fn excerpt(segments: &[&dyn Segment], window: ExcerptWindow) -> Excerpt {
    let window = window.clamped();
    let total: u64 = segments.iter().map(|s| s.total_bytes()).sum();
    if total <= window.whole_up_to {
        let (bytes, complete) = prefix(segments, total);
        if complete {
            return Excerpt {
                head: String::from_utf8_lossy(&bytes).into_owned(),
                tail: String::new(),
                omitted_bytes: 0,
            };
        }
    }
    let (head_raw, _) = prefix(segments, window.head_bytes.min(total));
    let (head, head_used) = decode_head(&head_raw, window.head_bytes);
    let room = total - head_used as u64;
    let tail_raw = suffix(segments, window.tail_bytes.min(room));
    let at_start = tail_raw.len() as u64 == room && head_used == 0;
    let (tail, tail_used) = decode_tail(&tail_raw, window.tail_bytes, at_start);
    Excerpt {
        head,
        tail,
        omitted_bytes: total - head_used as u64 - tail_used as u64,
    }
}

/// Up to `n` bytes from the start, stopping early at bytes no longer held.
/// Also says whether all `n` were read.
fn prefix(segments: &[&dyn Segment], n: u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    for segment in segments {
        let need = n - out.len() as u64;
        if need == 0 {
            break;
        }
        let take = need
            .min(segment.total_bytes())
            .min(segment.held_from_start());
        out.extend(segment.bytes(0, take));
        if take < segment.total_bytes() {
            break;
        }
    }
    let complete = out.len() as u64 == n;
    (out, complete)
}

/// Up to `n` bytes from the end, stopping early at bytes no longer held.
fn suffix(segments: &[&dyn Segment], n: u64) -> Vec<u8> {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut got = 0;
    for segment in segments.iter().rev() {
        let need = n - got;
        if need == 0 {
            break;
        }
        let take = need.min(segment.total_bytes()).min(segment.held_from_end());
        let len = segment.total_bytes();
        parts.push(segment.bytes(len - take, len));
        got += take;
        if take < len {
            break;
        }
    }
    parts.into_iter().rev().flatten().collect()
}

/// Decodes the start of a longer output into at most `max` bytes of text, with
/// a character cut by the excerpt left out. Returns the text and the raw bytes
/// it covers.
fn decode_head(raw: &[u8], max: u64) -> (String, usize) {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if let Ok(valid) = std::str::from_utf8(raw) {
        // The common case: no replacement, so the budget is a plain cut.
        let mut end = max.min(valid.len());
        while !valid.is_char_boundary(end) {
            end -= 1;
        }
        return (valid[..end].to_owned(), end);
    }
    let mut text = String::new();
    let mut used = 0;
    for chunk in raw.utf8_chunks() {
        for ch in chunk.valid().chars() {
            if text.len() + ch.len_utf8() > max {
                return (text, used);
            }
            text.push(ch);
            used += ch.len_utf8();
        }
        let invalid = chunk.invalid();
        if invalid.is_empty() {
            continue;
        }
        // A sequence the cut split is not invalid, only incomplete: leave it out.
        if used + invalid.len() == raw.len() && starts_sequence(invalid) {
            return (text, used);
        }
        if text.len() + '\u{FFFD}'.len_utf8() > max {
            return (text, used);
        }
        text.push('\u{FFFD}');
        used += invalid.len();
    }
    (text, used)
}

/// Decodes the end of an output into at most `max` bytes of text. Unless the
/// bytes start the output, continuation bytes the cut left at the front are
/// dropped. Returns the text and the raw bytes it covers.
fn decode_tail(raw: &[u8], max: u64, at_start: bool) -> (String, usize) {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let skip = if at_start {
        0
    } else {
        raw.iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count()
    };
    if let Ok(valid) = std::str::from_utf8(&raw[skip..]) {
        let mut start = valid.len().saturating_sub(max);
        while !valid.is_char_boundary(start) {
            start += 1;
        }
        return (valid[start..].to_owned(), raw.len() - skip - start);
    }
    // (text piece, raw bytes it stands for), kept from the end.
    let mut pieces: Vec<(char, usize)> = Vec::new();
    for chunk in raw[skip..].utf8_chunks() {
        pieces.extend(chunk.valid().chars().map(|c| (c, c.len_utf8())));
        if !chunk.invalid().is_empty() {
            pieces.push(('\u{FFFD}', chunk.invalid().len()));
        }
    }
    let mut len = 0;
    let mut used = 0;
    let mut keep = 0;
    for (ch, raw_len) in pieces.iter().rev() {
        if len + ch.len_utf8() > max {
            break;
        }
        len += ch.len_utf8();
        used += raw_len;
        keep += 1;
    }
    let text = pieces[pieces.len() - keep..]
        .iter()
        .map(|(c, _)| *c)
        .collect();
    (text, used)
}

/// Whether `bytes` is the valid beginning of a multi-byte character.
fn starts_sequence(bytes: &[u8]) -> bool {
    let needed = match bytes[0] {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return false,
    };
    bytes.len() < needed && bytes[1..].iter().all(|b| (b & 0xC0) == 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(whole: u64, head: u64, tail: u64) -> ExcerptWindow {
        ExcerptWindow {
            whole_up_to: whole,
            head_bytes: head,
            tail_bytes: tail,
        }
    }

    #[test]
    fn short_output_comes_back_whole() {
        let e = text_excerpt("hello", window(10, 2, 2));
        assert_eq!(
            (e.head.as_str(), e.tail.as_str(), e.omitted_bytes),
            ("hello", "", 0)
        );
    }

    #[test]
    fn long_output_keeps_both_ends_on_character_boundaries() {
        let text = format!("ab{}cd", "界".repeat(10));
        let e = text_excerpt(&text, window(10, 4, 5));
        assert_eq!(e.head, "ab");
        assert_eq!(e.tail, "界cd");
        assert_eq!(e.omitted_bytes, text.len() as u64 - 2 - 5);
    }

    #[test]
    fn invalid_bytes_become_replacements_within_the_budget() {
        let raw: &[u8] = b"\xff\xffabc\xfe";
        let e = excerpt(&[&raw], window(3, 4, 3));
        assert_eq!(e.head, "\u{FFFD}");
        assert_eq!(e.tail, "\u{FFFD}");
        assert_eq!(e.omitted_bytes, 6 - 1 - 1);
    }

    #[test]
    fn segments_join_and_unheld_bytes_count_as_omitted() {
        struct Lost(u64);
        impl Segment for Lost {
            fn total_bytes(&self) -> u64 {
                self.0
            }
            fn held_from_start(&self) -> u64 {
                0
            }
            fn held_from_end(&self) -> u64 {
                2
            }
            fn bytes(&self, from: u64, to: u64) -> Vec<u8> {
                vec![b'z'; (to - from) as usize]
            }
        }
        let first: &[u8] = b"head-";
        let e = excerpt(&[&first, &Lost(100)], window(1000, 50, 50));
        assert_eq!(e.head, "head-");
        assert_eq!(e.tail, "zz");
        assert_eq!(e.omitted_bytes, 98);
    }
}
