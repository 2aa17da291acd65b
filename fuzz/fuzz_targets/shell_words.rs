//! POSIX shell-word splitting (a shell tool's command line, a dataset case's `check`) on
//! arbitrary text. Invariants: nothing panics; a split line has at most `MAX_WORDS` words,
//! none holding NUL; the words, each re-quoted in single quotes and joined by spaces, split
//! back to the same words (within the longest line); and a dataset case whose `check` is
//! the text either takes exactly those words as its argv or is refused with the reason the
//! splitter gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::agent::words::{split, MAX_LINE, MAX_WORDS};
use murmur::eval_view::dataset::parse_case;

/// `w` as one single-quoted shell word (a `'` closes, is escaped, and reopens).
fn quoted(w: &str) -> String {
    format!("'{}'", w.replace('\'', r"'\''"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let split_once = split(text);
    if let Ok(words) = &split_once {
        assert!(words.len() <= MAX_WORDS);
        assert!(words.iter().all(|w| !w.contains('\0')));
        let again = words.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(" ");
        if again.len() <= MAX_LINE {
            assert_eq!(split(&again).as_ref(), Ok(words));
        }
    }
    let line = serde_json::json!({"case_id": "c", "task_path": "t", "check": text}).to_string();
    match (parse_case(line.as_bytes()), &split_once) {
        (Ok(case), Ok(words)) => assert_eq!(&case.check.unwrap().argv, words),
        (Err(why), Err(reason)) if text.len() <= 4096 => assert!(why.ends_with(reason.as_str()), "{why}"),
        (Err(_), Ok(words)) => assert!(words.is_empty() || text.len() > 4096),
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) => panic!("a check the splitter refuses ({e}) was taken"),
    }
});
