//! The eval reader on arbitrary bytes, split at an arbitrary point. Invariants: it never
//! panics; nothing rendered (the report's text, a diff's text) carries a control character
//! other than a newline or a bidi override; the JSON forms serialise; splitting the input
//! anywhere gives the same report; a report compared with itself scored the same; a dataset
//! parse never panics and every case it accepts has relative paths without `..`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::eval_view::{dataset, diff, report_all, Report, Splitter, MAX_LINE};

fn safe(s: &str) -> bool {
    !s.chars().any(|c| {
        (c.is_control() && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

fuzz_target!(|data: &[u8]| {
    let report = report_all(data);
    assert!(safe(&report.to_text()));
    let _ = serde_json::to_string(&report.to_json()).unwrap();
    let same = diff(&report, &report);
    assert_eq!(same.verdict(), "A and B scored the same");
    assert!(safe(&same.to_text()));
    let _ = serde_json::to_string(&same.to_json()).unwrap();
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut split = Splitter::new(MAX_LINE);
    let mut again = Report::default();
    let mut lines = split.feed(&data[..cut]);
    lines.extend(split.feed(&data[cut..]));
    lines.extend(split.finish());
    for line in lines {
        again.push(line);
    }
    assert_eq!(again, report);
    if let Ok(cases) = dataset::parse(data) {
        for c in cases {
            for p in std::iter::once(&c.task_path).chain(c.start.as_ref()) {
                assert!(
                    !p.starts_with('/') && !p.split('/').any(|x| x == ".." || x.is_empty()),
                    "{p}"
                );
            }
        }
    }
});
