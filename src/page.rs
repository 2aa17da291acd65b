//! One self-contained HTML page (`mur trace --html`, `mur eval show --html`): text escaped
//! for HTML, JSON embedded for the page's script, and the frame that carries a strict
//! content-security policy (`default-src 'none'`) admitting exactly the page's one style and
//! one script by their SHA-256, computed here as the page is rendered. Nothing a page shows
//! is fetched: no external style, script, image or font, so opening it makes no request.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// `s` as HTML text or attribute value: `&`, `<`, `>`, `"` and `'` escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    escape_into(&mut out, s);
    out
}

/// Append the escaped `s` to `out`.
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `v` as JSON safe inside `<script type="application/json">`: `<`, `>`, `&` and the
/// JavaScript line terminators U+2028/U+2029 written as `\uXXXX` escapes, so no `</script>`
/// or `<!--` in a string can end or change the element; the text still parses as the same
/// JSON (those characters only ever occur inside strings).
pub fn json_for_script(v: &serde_json::Value) -> String {
    let raw = v.to_string();
    let mut out = String::with_capacity(raw.len() + raw.len() / 16);
    for c in raw.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The CSP source of an inline element's exact text: `'sha256-<base64>'`.
pub fn hash_source(text: &str) -> String {
    format!(
        "'sha256-{}'",
        crate::b64::encode_standard(&Sha256::digest(text.as_bytes()))
    )
}

/// What a page is made of; the body is HTML already escaped by its renderer.
pub struct Page<'a> {
    pub title: &'a str,
    /// The page's one stylesheet (a constant: it never holds page data).
    pub style: &'static str,
    /// The page's one script, if it has one (a constant: its data comes from `data`).
    pub script: Option<&'static str>,
    /// JSON for the script, embedded as `<script type="application/json" id="page-data">`.
    pub data: Option<&'a serde_json::Value>,
    pub body: &'a str,
}

/// The policy of a page: nothing by default; the one style and script by hash.
pub fn policy(style: &str, script: Option<&str>) -> String {
    let script_src = script.map_or_else(|| "'none'".to_string(), hash_source);
    format!(
        "default-src 'none'; style-src {}; script-src {script_src}; img-src 'none'; base-uri 'none'; form-action 'none'",
        hash_source(style)
    )
}

/// The whole document.
pub fn render(p: &Page) -> String {
    let mut out = String::with_capacity(p.body.len() + p.style.len() + 4096);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        out,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        escape(&policy(p.style, p.script))
    );
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", escape(p.title));
    let _ = writeln!(out, "<style>{}</style>\n</head>\n<body>", p.style);
    out.push_str(p.body);
    if let Some(data) = p.data {
        let _ = writeln!(
            out,
            "<script type=\"application/json\" id=\"page-data\">{}</script>",
            json_for_script(data)
        );
    }
    if let Some(script) = p.script {
        let _ = writeln!(out, "<script>{script}</script>");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_json_cannot_leave_their_element() {
        assert_eq!(
            escape("<script>a&'\"</script>"),
            "&lt;script&gt;a&amp;&#39;&quot;&lt;/script&gt;"
        );
        let v = json!({"t": "</script><!-- & \u{2028}\u{2029}"});
        let j = json_for_script(&v);
        assert!(!j.contains('<') && !j.contains('>') && !j.contains('&'), "{j}");
        assert!(!j.contains('\u{2028}') && !j.contains('\u{2029}'), "{j}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&j).unwrap(), v);
    }

    #[test]
    fn the_policy_names_the_exact_style_and_script() {
        // The SHA-256 of the empty string, as browsers compute it for `<script></script>`.
        assert_eq!(
            hash_source(""),
            "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
        );
        let page = render(&Page {
            title: "<t>",
            style: "p{}",
            script: Some("1"),
            data: Some(&json!([1])),
            body: "<p>x</p>\n",
        });
        let csp = escape(&format!(
            "style-src {}; script-src {}",
            hash_source("p{}"),
            hash_source("1")
        ));
        assert!(page.contains(&csp), "{page}");
        assert!(page.contains("<title>&lt;t&gt;</title>"));
        assert!(page.contains("<style>p{}</style>") && page.contains("<script>1</script>"));
        assert!(!page.contains("unsafe-inline"));
        assert!(policy("p{}", None).contains("script-src 'none'"));
    }
}
