//! What may reach the operator's terminal from a trace: no control characters (so no escape
//! sequence), no bidirectional overrides or isolates, no line or paragraph separators, and
//! at most a given number of characters.

/// Characters dropped: C0 and C1 controls, DEL, and the bidi and separator code points that
/// reorder or break what the terminal shows.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

/// `s` without hidden characters, cut to `max` characters (an ellipsis marks the cut).
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)));
    clean_into(&mut out, s, max);
    out
}

/// Append the cleaned `s` to `out`.
pub fn clean_into(out: &mut String, s: &str, max: usize) {
    for (n, c) in s.chars().filter(|c| !hidden(*c)).enumerate() {
        if n == max {
            out.push('…');
            return;
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_bidi_and_long_text_do_not_survive() {
        assert_eq!(clean("a\u{1b}[31mred\u{7}\r\nb", 100), "a[31mredb");
        assert_eq!(clean("x\u{202E}gnp.exe\u{2066}", 100), "xgnp.exe");
        assert_eq!(clean("\u{9b}31m", 100), "31m");
        assert_eq!(clean("abcdef", 3), "abc…");
        assert_eq!(clean("abc", 3), "abc");
    }
}
