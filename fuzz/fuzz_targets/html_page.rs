//! The pages of `mur trace --html` and `mur eval show --html` on arbitrary bytes (the first
//! byte picks which; an eval page gets the rest split into two variants). Invariants: it
//! never panics; the only tags in the page are the renderer's own (no tag, comment or
//! `</script>` from the input, in any letter case); a trace page has exactly its two script
//! elements, an eval page none; the embedded JSON holds no `<`, `>` or `&` and parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::eval_view::report_all;

/// Every tag name the renderers write.
const TAGS: &[&str] = &[
    "!doctype", "html", "head", "meta", "title", "style", "body", "script", "header", "h1", "h2", "p", "b",
    "span", "dl", "div", "dt", "dd", "ul", "li", "section", "ol", "table", "tr", "th", "td", "i", "svg",
    "line", "text", "rect",
];

/// The tag names of `page`, as an HTML parser would start them (`<` then a letter, `/` or `!`).
fn tags(page: &str) -> Vec<String> {
    let bytes = page.as_bytes();
    let mut out = Vec::new();
    for (i, _) in page.match_indices('<') {
        let rest = &bytes[i + 1..];
        let start = usize::from(rest.first() == Some(&b'/'));
        let name: String = rest[start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'!' || **b == b'-')
            .map(|b| b.to_ascii_lowercase() as char)
            .collect();
        out.push(name);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let page = if pick % 2 == 0 {
        murmur::trace_view::html::page_of(rest)
    } else {
        let cut = rest.first().map_or(0, |&b| b as usize % (rest.len() + 1));
        murmur::eval_view::html::page(&[
            (
                String::from_utf8_lossy(&rest[..cut.min(64)]).into_owned(),
                report_all(&rest[..cut]),
            ),
            ("b".into(), report_all(&rest[cut..])),
        ])
    };
    // `<` before anything else (`i < n` in the script) is text to a parser, not a tag.
    for name in tags(&page).into_iter().filter(|n| !n.is_empty()) {
        assert!(
            TAGS.contains(&name.as_str()),
            "a tag <{name}> the renderer does not write"
        );
    }
    let lower = page.to_ascii_lowercase();
    assert!(!lower.contains("<!--"));
    let scripts = if pick % 2 == 0 { 2 } else { 0 };
    assert_eq!(lower.matches("<script").count(), scripts);
    assert_eq!(lower.matches("</script").count(), scripts);
    if let Some(at) = page.find("id=\"page-data\">") {
        let json = &page[at + 15..];
        let json = &json[..json.find("</script>").unwrap()];
        assert!(!json.contains(['<', '>', '&']));
        let _: serde_json::Value = serde_json::from_str(json).unwrap();
    }
});
