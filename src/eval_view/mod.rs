//! Reading `eval.jsonl` back for a person or a script: each line a record ([`record`]), the
//! records tallied per scorer and per dataset ([`Report`]), two reports compared
//! ([`Diff`]). An eval file is untrusted input like a trace (a hook wrote it from a session's
//! events), so lines are split with the trace reader's bounded splitter, nothing here panics
//! on any bytes, and every string printed passes the trace reader's `clean`. [`html`] draws
//! reports side by side as one self-contained page.

pub mod dataset;
pub mod html;
pub mod record;

pub use crate::trace_view::{clean, Line, Splitter, MAX_LINE};
use record::{LineError, Overall, Record};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The most bytes of one eval file read.
pub const MAX_FILE: u64 = 64 * 1024 * 1024;
/// The malformed lines kept by number (the rest are only counted).
const MAX_PROBLEMS: usize = 100;

/// `n / of`, 0 when `of` is 0: every rate and mean here.
pub fn ratio(n: f64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n / of as f64
    }
}

/// One scorer's event verdicts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub pass: u64,
    pub fail: u64,
    pub score_sum: f64,
}

impl Tally {
    /// Passes over verdicts (0 when there are none).
    pub fn pass_rate(&self) -> f64 {
        ratio(self.pass as f64, self.pass + self.fail)
    }

    fn mean(&self) -> f64 {
        ratio(self.score_sum, self.pass + self.fail)
    }
}

/// One dataset's case runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dataset {
    pub pass: u64,
    pub fail: u64,
    pub no_scores: u64,
    /// Per scorer: (sum of scores, how many).
    pub scores: BTreeMap<String, (f64, u64)>,
}

impl Dataset {
    /// Passing runs over runs that were scored.
    pub fn pass_rate(&self) -> f64 {
        ratio(self.pass as f64, self.pass + self.fail)
    }
}

/// An eval file tallied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub event_scores: u64,
    pub dataset_runs: u64,
    pub scorers: BTreeMap<String, Tally>,
    pub datasets: BTreeMap<String, Dataset>,
    /// Malformed lines: (number, why), the first [`MAX_PROBLEMS`].
    pub problems: Vec<(u64, String)>,
    pub problem_count: u64,
    /// The first line whose record type is unknown, and the type: the file is refused.
    pub unknown: Option<(u64, String)>,
}

impl Report {
    /// Take one line.
    pub fn push(&mut self, line: Line) {
        let (number, bytes) = match line {
            Line::Text { number, bytes } | Line::Unterminated { number, bytes } => (number, bytes),
            Line::TooLong { number } => {
                self.problem(number, format!("longer than {MAX_LINE} bytes"));
                return;
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match record::parse(&bytes) {
            Ok(Record::EventScore(e)) => {
                self.event_scores += 1;
                let t = self.scorers.entry(e.scorer).or_default();
                if e.pass {
                    t.pass += 1;
                } else {
                    t.fail += 1;
                }
                t.score_sum += e.score;
            }
            Ok(Record::DatasetRun(d)) => {
                self.dataset_runs += 1;
                let ds = self.datasets.entry(d.dataset_id).or_default();
                match d.overall {
                    Overall::Pass => ds.pass += 1,
                    Overall::Fail => ds.fail += 1,
                    Overall::NoScores => ds.no_scores += 1,
                }
                for (scorer, score) in d.scores {
                    let s = ds.scores.entry(scorer).or_insert((0.0, 0));
                    s.0 += score;
                    s.1 += 1;
                }
            }
            Err(LineError::Malformed(why)) => self.problem(number, why),
            Err(LineError::UnknownType(t)) => {
                if self.unknown.is_none() {
                    self.unknown = Some((number, t));
                }
            }
        }
    }

    fn problem(&mut self, number: u64, why: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push((number, why));
        }
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> Value {
        let scorers: Map<String, Value> = self
            .scorers
            .iter()
            .map(|(k, t)| {
                let v = json!({"pass": t.pass, "fail": t.fail, "pass_rate": t.pass_rate(), "mean_score": t.mean()});
                (k.clone(), v)
            })
            .collect();
        let datasets: Map<String, Value> = self
            .datasets
            .iter()
            .map(|(k, d)| {
                let means: Map<String, Value> = d
                    .scores
                    .iter()
                    .map(|(s, (sum, n))| (s.clone(), json!(sum / *n as f64)))
                    .collect();
                let v = json!({"pass": d.pass, "fail": d.fail, "no_scores": d.no_scores,
                    "pass_rate": d.pass_rate(), "mean_scores": means});
                (k.clone(), v)
            })
            .collect();
        json!({
            "event_scores": self.event_scores, "dataset_runs": self.dataset_runs,
            "scorers": scorers, "datasets": datasets,
            "malformed_lines": self.problems.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            "malformed_count": self.problem_count,
        })
    }

    /// The report as text: a table of scorers, then each dataset.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "eval: {} event scores, {} dataset runs",
            self.event_scores, self.dataset_runs
        );
        if self.problem_count > 0 {
            out.push_str(&format!(", {} malformed lines skipped", self.problem_count));
        }
        out.push('\n');
        if !self.scorers.is_empty() {
            out.push_str(&format!(
                "{:<24} {:>6} {:>6} {:>10} {:>11}\n",
                "scorer", "pass", "fail", "pass rate", "mean score"
            ));
            for (name, t) in &self.scorers {
                out.push_str(&format!(
                    "{:<24} {:>6} {:>6} {:>9.1}% {:>11.3}\n",
                    clean(name, 24),
                    t.pass,
                    t.fail,
                    t.pass_rate() * 100.0,
                    t.mean()
                ));
            }
        }
        for (id, d) in &self.datasets {
            out.push_str(&format!(
                "dataset {}: {} runs: {} pass, {} fail, {} no_scores ({:.1}% pass)\n",
                clean(id, 80),
                d.pass + d.fail + d.no_scores,
                d.pass,
                d.fail,
                d.no_scores,
                d.pass_rate() * 100.0
            ));
            for (s, (sum, n)) in &d.scores {
                out.push_str(&format!(
                    "  {:<22} mean score {:.3}\n",
                    clean(s, 22),
                    sum / *n as f64
                ));
            }
        }
        out
    }
}

/// Tally a whole eval file held in memory (tests and the fuzz target).
pub fn report_all(bytes: &[u8]) -> Report {
    let mut split = Splitter::new(MAX_LINE);
    let mut r = Report::default();
    let mut lines = split.feed(bytes);
    lines.extend(split.finish());
    for l in lines {
        r.push(l);
    }
    r
}

/// Two reports compared, per scorer and per dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// Scorer → (A's pass rate, B's), either absent where that run has no verdict of it.
    pub scorers: BTreeMap<String, (Option<f64>, Option<f64>)>,
    pub datasets: BTreeMap<String, (Option<f64>, Option<f64>)>,
    /// Sum of B − A over what both runs scored: above 0, B scored better.
    pub delta: f64,
}

/// Compare `a` with `b`.
pub fn diff(a: &Report, b: &Report) -> Diff {
    let mut scorers = BTreeMap::new();
    for (k, t) in &a.scorers {
        scorers.entry(k.clone()).or_insert((None, None)).0 = Some(t.pass_rate());
    }
    for (k, t) in &b.scorers {
        scorers.entry(k.clone()).or_insert((None, None)).1 = Some(t.pass_rate());
    }
    let mut datasets = BTreeMap::new();
    for (k, d) in &a.datasets {
        datasets.entry(k.clone()).or_insert((None, None)).0 = Some(d.pass_rate());
    }
    for (k, d) in &b.datasets {
        datasets.entry(k.clone()).or_insert((None, None)).1 = Some(d.pass_rate());
    }
    let delta = scorers
        .values()
        .chain(datasets.values())
        .filter_map(|(x, y)| Some(y.as_ref()? - x.as_ref()?))
        .sum();
    Diff {
        scorers,
        datasets,
        delta,
    }
}

impl Diff {
    /// Which run scored better, in words.
    pub fn verdict(&self) -> &'static str {
        const EPSILON: f64 = 1e-9;
        if self.delta > EPSILON {
            "B scored better"
        } else if self.delta < -EPSILON {
            "A scored better"
        } else {
            "A and B scored the same"
        }
    }

    pub fn to_json(&self) -> Value {
        let rows = |m: &BTreeMap<String, (Option<f64>, Option<f64>)>| -> Map<String, Value> {
            m.iter()
                .map(|(k, (a, b))| {
                    let d = a.zip(*b).map(|(a, b)| b - a);
                    (k.clone(), json!({"a": a, "b": b, "delta": d}))
                })
                .collect()
        };
        json!({"scorers": rows(&self.scorers), "datasets": rows(&self.datasets),
            "delta": self.delta, "verdict": self.verdict()})
    }

    pub fn to_text(&self) -> String {
        let pct = |v: &Option<f64>| v.map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0));
        let mut out = format!("{:<32} {:>9} {:>9} {:>9}\n", "pass rate", "A", "B", "B - A");
        let mut row = |label: String, (a, b): &(Option<f64>, Option<f64>)| {
            let d = a
                .zip(*b)
                .map_or("-".to_string(), |(a, b)| format!("{:+.1}", (b - a) * 100.0));
            out.push_str(&format!("{:<32} {:>9} {:>9} {:>9}\n", label, pct(a), pct(b), d));
        };
        for (k, v) in &self.scorers {
            row(format!("scorer {}", clean(k, 24)), v);
        }
        for (k, v) in &self.datasets {
            row(format!("dataset {}", clean(k, 23)), v);
        }
        out.push_str(self.verdict());
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = concat!(
        r#"{"type":"event_score","ts":1,"turn":0,"event_type":"session_end","scorer":"exit_ok","result":"pass","score":1}"#,
        "\n",
        r#"{"type":"event_score","ts":2,"turn":null,"event_type":"session_end","scorer":"turn_limit","result":"fail","score":0,"reason":"7 turns > 5"}"#,
        "\nnot json\n\n",
        r#"{"type":"dataset_run","ts":3,"dataset_id":"ds","case_id":"c1","overall":"fail","scores":{"exit_ok":1,"turn_limit":0}}"#,
        "\n"
    );

    #[test]
    fn a_file_is_tallied_per_scorer_and_dataset_and_bad_lines_are_named() {
        let r = report_all(A.as_bytes());
        assert_eq!((r.event_scores, r.dataset_runs), (2, 1));
        assert_eq!(r.problems, [(3, "not a JSON object".to_string())]);
        assert_eq!(r.scorers["exit_ok"].pass_rate(), 1.0);
        assert_eq!(r.scorers["turn_limit"].pass_rate(), 0.0);
        assert_eq!(r.datasets["ds"].fail, 1);
        assert_eq!(r.unknown, None);
        let text = r.to_text();
        assert!(
            text.starts_with("eval: 2 event scores, 1 dataset runs, 1 malformed lines skipped\n"),
            "{text}"
        );
        assert!(
            text.contains("dataset ds: 1 runs: 0 pass, 1 fail, 0 no_scores (0.0% pass)\n"),
            "{text}"
        );
        let r = report_all(b"{\"type\":\"mystery\"}\n{\"type\":\"other\"}\n");
        assert_eq!(r.unknown, Some((1, "mystery".into())));
    }

    #[test]
    fn a_diff_says_which_run_scored_better() {
        let a = report_all(A.as_bytes());
        let better = A.replace(
            r#""result":"fail","score":0,"reason""#,
            r#""result":"pass","score":1,"reason""#,
        );
        let b = report_all(better.as_bytes());
        let d = diff(&a, &b);
        assert_eq!(d.scorers["turn_limit"], (Some(0.0), Some(1.0)));
        assert_eq!(d.verdict(), "B scored better");
        assert_eq!(diff(&b, &a).verdict(), "A scored better");
        assert_eq!(diff(&a, &a).verdict(), "A and B scored the same");
        assert!(d.to_text().ends_with("B scored better\n"));
    }
}
