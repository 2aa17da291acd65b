//! The driver protocol on arbitrary bytes: a driver's response (untrusted: registry code
//! relaying a model's words) and a shell tool's command line (a model's). Invariants:
//! nothing panics; a parsed response has at most `MAX_TOOL_CALLS` calls, each with a
//! non-empty name of bounded length, and a tool turn exactly when calls are present; a
//! split command line has at most `MAX_WORDS` words, none holding NUL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::agent::wire::{parse_response, StopReason, MAX_NAME, MAX_TOOL_CALLS};
use murmur::agent::{sanitize, words};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = parse_response(text) {
        let calls = r.calls();
        assert!(calls.len() <= MAX_TOOL_CALLS);
        assert_eq!(r.stop_reason == StopReason::ToolCall, !calls.is_empty());
        for (id, name, _) in calls {
            assert!(!name.is_empty() && name.len() <= MAX_NAME && id.len() <= MAX_NAME);
        }
    }
    if let Ok(w) = words::split(text) {
        assert!(w.len() <= words::MAX_WORDS);
        assert!(w.iter().all(|x| !x.contains('\0')));
    }
    let line = sanitize::one_line(text, 50);
    assert!(!line.contains('\n') && line.chars().count() <= 51);
    assert!(!sanitize::inert_markdown(text).contains(['\n', '<', '>', '\u{202E}']));
});
