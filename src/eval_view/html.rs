//! An evaluation as one self-contained page (`mur eval show --html`): each source a variant,
//! a pass-rate chart per scorer and per dataset with one bar per variant (inline SVG, no
//! script), and the figures as tables. Every name from a file is cleaned and escaped
//! ([`crate::page`]); the page fetches nothing and runs nothing.

use super::{clean, Report};
use crate::page::{escape, Page};
use std::collections::BTreeSet;
use std::fmt::Write as _;

const STYLE: &str = include_str!("../page.css");
/// Longest name shown in a chart or a table.
const NAME: usize = 40;
/// The chart's geometry, in px.
const WIDTH: u64 = 760;
const LABEL: u64 = 230;
const BARS: u64 = 420;
const BAR: u64 = 14;
const GAP: u64 = 12;
/// The most names charted and tabled per section (the rest are counted).
const MAX_NAMES: usize = 500;
/// Colours cycle after this many variants.
const COLOURS: usize = 6;

/// One variant's pass rate of one scorer or dataset: (passes, verdicts).
type Rate = Option<(u64, u64)>;

/// The page of `variants` (label, report), in the order given.
pub fn page(variants: &[(String, Report)]) -> String {
    let mut body = String::new();
    header(&mut body, variants);
    let scorers = names(variants, |r| r.scorers.keys().cloned().collect());
    let datasets = names(variants, |r| r.datasets.keys().cloned().collect());
    let scorer_rate = |r: &Report, k: &str| r.scorers.get(k).map(|t| (t.pass, t.pass + t.fail));
    let dataset_rate = |r: &Report, k: &str| r.datasets.get(k).map(|d| (d.pass, d.pass + d.fail));
    section(
        &mut body,
        "scorers",
        "Pass rate per scorer",
        variants,
        &scorers,
        scorer_rate,
    );
    section(
        &mut body,
        "datasets",
        "Pass rate per dataset",
        variants,
        &datasets,
        dataset_rate,
    );
    skipped(&mut body, variants);
    crate::page::render(&Page {
        title: "mur eval show",
        style: STYLE,
        script: None,
        data: None,
        body: &body,
    })
}

/// Every key any variant has, in order.
fn names(variants: &[(String, Report)], keys: impl Fn(&Report) -> Vec<String>) -> Vec<String> {
    let all: BTreeSet<String> = variants.iter().flat_map(|(_, r)| keys(r)).collect();
    all.into_iter().collect()
}

fn colour(v: usize) -> String {
    format!("v{}", v % COLOURS)
}

/// Step: the variants, each with its colour, source and counts.
fn header(out: &mut String, variants: &[(String, Report)]) {
    let _ = write!(
        out,
        "<header><h1>Evaluation</h1><p class=\"meta\">{} variant(s); each bar is one variant's pass rate</p><p class=\"legend\">",
        variants.len()
    );
    for (v, (label, r)) in variants.iter().enumerate() {
        let _ = write!(
            out,
            "<span><i class=\"{}\"></i>variant {}: <span class=\"text\">{}</span> ({} event scores, {} dataset runs)</span>",
            colour(v),
            v + 1,
            escape(&clean(label, 200)),
            r.event_scores,
            r.dataset_runs
        );
    }
    out.push_str("</p></header>\n");
}

fn pct(rate: Rate) -> String {
    match rate {
        Some((pass, of)) if of > 0 => format!("{:.1}% ({pass}/{of})", 100.0 * pass as f64 / of as f64),
        Some(_) => "no verdicts".into(),
        None => "-".into(),
    }
}

/// Step: one chart and its table; nothing when no variant has any such name.
fn section(
    out: &mut String,
    id: &str,
    title: &str,
    variants: &[(String, Report)],
    keys: &[String],
    rate: impl Fn(&Report, &str) -> Rate,
) {
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(out, "<section id=\"{id}\"><h2>{title}</h2>");
    if keys.len() > MAX_NAMES {
        let _ = writeln!(
            out,
            "<p class=\"notice\">the first {MAX_NAMES} of {} names are shown</p>",
            keys.len()
        );
    }
    let keys = &keys[..keys.len().min(MAX_NAMES)];
    chart(out, title, variants, keys, &rate);
    out.push_str("<table><tr><th>name</th>");
    for v in 0..variants.len() {
        let _ = write!(out, "<th class=\"n\">variant {}</th>", v + 1);
    }
    out.push_str("</tr>");
    for k in keys {
        let _ = write!(out, "<tr><td class=\"text\">{}</td>", escape(&clean(k, NAME)));
        for (_, r) in variants {
            let _ = write!(out, "<td class=\"n\">{}</td>", pct(rate(r, k)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></section>\n");
}

/// A horizontal bar chart: a group per name, a bar per variant, a grid at every 25%.
fn chart(
    out: &mut String,
    title: &str,
    variants: &[(String, Report)],
    keys: &[String],
    rate: &impl Fn(&Report, &str) -> Rate,
) {
    let per = variants.len() as u64;
    let group = per * (BAR + 2) + GAP;
    let height = 24 + group * keys.len() as u64;
    let _ = write!(
        out,
        "<svg width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"{}\">",
        escape(title)
    );
    for q in 0..=4 {
        let x = LABEL + BARS * q / 4;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x}\" y1=\"14\" x2=\"{x}\" y2=\"{height}\"/><text x=\"{x}\" y=\"11\" text-anchor=\"middle\">{}%</text>",
            q * 25
        );
    }
    for (i, k) in keys.iter().enumerate() {
        let top = 20 + group * i as u64;
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            LABEL - 8,
            top + (per * (BAR + 2)) / 2 + 4,
            escape(&clean(k, NAME))
        );
        for (v, (_, r)) in variants.iter().enumerate() {
            let y = top + v as u64 * (BAR + 2);
            let r = rate(r, k);
            let share = match r {
                Some((pass, of)) if of > 0 => pass as f64 / of as f64,
                _ => 0.0,
            };
            let w = (share * BARS as f64).round() as u64;
            let _ = write!(
                out,
                "<rect class=\"{}\" x=\"{LABEL}\" y=\"{y}\" width=\"{w}\" height=\"{BAR}\"><title>variant {}: {}</title></rect><text x=\"{}\" y=\"{}\">{}</text>",
                colour(v),
                v + 1,
                pct(r),
                LABEL + w + 4,
                y + BAR - 3,
                pct(r)
            );
        }
    }
    out.push_str("</svg>\n");
}

/// Step: the lines each variant's file had that were skipped.
fn skipped(out: &mut String, variants: &[(String, Report)]) {
    for (v, (_, r)) in variants.iter().enumerate() {
        if r.problem_count == 0 {
            continue;
        }
        let _ = write!(
            out,
            "<div class=\"notice bad\">variant {}: {} malformed lines skipped<ul>",
            v + 1,
            r.problem_count
        );
        for (n, why) in &r.problems {
            let _ = write!(out, "<li>line {n}: {}</li>", escape(why));
        }
        out.push_str("</ul></div>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::super::report_all;

    #[test]
    fn names_from_the_file_are_escaped_and_each_variant_has_a_bar() {
        let planted = "</script><img src=x onerror=alert(1)><!--";
        let a = format!(
            "{}\n{}\nnot json\n",
            serde_json::json!({"type": "event_score", "ts": 1, "turn": null, "event_type": "session_end",
                "scorer": planted, "result": "pass", "score": 1}),
            serde_json::json!({"type": "dataset_run", "ts": 2, "dataset_id": planted, "case_id": "c",
                "overall": "fail", "scores": {}})
        );
        let page = super::page(&[
            ("a <b>".into(), report_all(a.as_bytes())),
            (
                "b".into(),
                report_all(a.replace("\"pass\"", "\"fail\"").as_bytes()),
            ),
        ]);
        assert!(
            !page.contains("<img") && !page.contains("<!--") && !page.contains("<script"),
            "{page}"
        );
        assert!(
            page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
            "{page}"
        );
        assert!(
            page.contains("variant 1: <span class=\"text\">a &lt;b&gt;</span>"),
            "{page}"
        );
        assert!(page.contains("<title>variant 1: 100.0% (1/1)</title>"), "{page}");
        assert!(page.contains("<title>variant 2: 0.0% (0/1)</title>"), "{page}");
        assert!(page.contains("variant 1: 1 malformed lines skipped"), "{page}");
        assert!(page.contains("script-src 'none'") || page.contains("script-src &#39;none&#39;"));
    }
}
