//! Byte caps: UTF-8-safe head and tail cuts and the "fit with suffix" rule.
//!
//! Every cap counts UTF-8 bytes of the whole model-visible result. A cut never
//! splits a character, so it may land up to 3 bytes short of the budget.

/// Marker placed before the status suffix when a read was cut.
pub const OUTPUT_TRUNCATED: &str = "\n[output truncated]";
/// Marker for any other single-text result that was cut.
pub const RESULT_TRUNCATED: &str = "\n[result truncated]";
/// Marker inside a bounded completion notice.
pub const NOTICE_TRUNCATED: &str = "\n[notice truncated]";

/// The first `n` bytes of `s`, without a trailing incomplete character.
pub fn head(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The last `n` bytes of `s`, without leading continuation bytes.
pub fn tail(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Joins `content` and `suffix`, keeping the tail of `content` when the whole would
/// exceed `max_bytes`; the `omitted` marker (which starts with `\n`) says so.
///
/// When `content` already ends with the marker's text (without its newline), the
/// marker is not added a second time.
pub fn fit_with_suffix(
    content: &str,
    suffix: &str,
    max_bytes: Option<u64>,
    omitted: &str,
) -> String {
    let Some(max) = max_bytes else {
        return [content, suffix].concat();
    };
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if content.len() + suffix.len() <= max {
        return [content, suffix].concat();
    }
    let marker_text = omitted.strip_prefix('\n').unwrap_or(omitted);
    let fixed = if content.ends_with(marker_text) {
        suffix.to_owned()
    } else {
        [omitted, suffix].concat()
    };
    if fixed.len() >= max {
        return tail(&fixed, max).to_owned();
    }
    [tail(content, max - fixed.len()), fixed.as_str()].concat()
}

/// The generic path: a whole single-text result cut to `max_bytes`.
pub fn cap_result(text: &str, max_bytes: Option<u64>) -> String {
    fit_with_suffix(text, "", max_bytes, RESULT_TRUNCATED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_drops_an_incomplete_character() {
        assert_eq!(head("界界", 4), "界");
        assert_eq!(head("界界", 3), "界");
        assert_eq!(head("界界", 2), "");
        assert_eq!(head("abc", 10), "abc");
    }

    #[test]
    fn tail_drops_leading_continuation_bytes() {
        assert_eq!(tail("界界", 4), "界");
        assert_eq!(tail("界界", 5), "界");
        assert_eq!(tail("abc", 0), "");
        assert_eq!(tail("abc", 2), "bc");
    }

    #[test]
    fn suffix_wins_when_it_alone_fills_the_budget() {
        assert_eq!(
            cap_result("requested cancellation of job bash-1", Some(8)),
            "uncated]"
        );
    }

    #[test]
    fn generic_path_keeps_the_tail() {
        let text = "p".repeat(1000);
        let out = cap_result(&text, Some(64));
        assert_eq!(out, format!("{}{RESULT_TRUNCATED}", "p".repeat(45)));
    }

    #[test]
    fn no_cap_is_identity() {
        assert_eq!(fit_with_suffix("a", "b", None, OUTPUT_TRUNCATED), "ab");
    }
}
