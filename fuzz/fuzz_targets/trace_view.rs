//! The trace reader on arbitrary bytes, split at an arbitrary point as `--follow` sees a
//! growing file. Invariants: it never panics; nothing rendered (timeline, summary text or
//! JSON) carries a control character other than a newline or a bidi override; splitting the
//! input anywhere yields the same timeline.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::trace_view::{render_all, Splitter, Timeline, MAX_LINE};

fn safe(s: &str) -> bool {
    !s.chars().any(|c| {
        (c.is_control() && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

fuzz_target!(|data: &[u8]| {
    let (text, summary) = render_all(data);
    assert!(safe(&text));
    assert!(safe(&summary.to_text()));
    let _ = serde_json::to_string(&summary.to_json()).unwrap();
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut split = Splitter::new(MAX_LINE);
    let mut timeline = Timeline::new();
    let mut again = String::new();
    let mut lines = split.feed(&data[..cut]);
    lines.extend(split.feed(&data[cut..]));
    lines.extend(split.finish());
    for line in lines {
        for l in timeline.push(line) {
            again.push_str(&l);
            again.push('\n');
        }
    }
    assert_eq!(again, text);
});
