//! The scoring, pure: the config the hook's entry gives (`MURMUR_ARTIFACT_CONFIG`), what it
//! observed (one [`Observed`] per line of `observed.jsonl`), and the `eval.jsonl` records the
//! scorers make of them at session end.
//!
//! Config (a mapping; every scorer optional, none configured means no record):
//!
//! ```yaml
//! config:
//!   scorers:
//!     exit_ok: true            # each task ended ok
//!     turn_limit: 5            # each task took at most 5 turns
//!     tool_errors: 0           # at most 0 failed tool or shell calls in the session
//!     result_matches: "done"   # each task's result text contains "done"
//!     file_exists: out/report.md   # the path exists in the hook's preopen (filesystem.scope)
//!   dataset_id: smoke          # with case_id: also one dataset_run record
//!   case_id: case-1
//! ```

use serde_json::{json, Map, Value};

/// One thing the hook saw, as a line of `observed.jsonl`.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A task ended: its status, turns and result text.
    TaskEnd {
        exit_status: String,
        turns: u32,
        result: String,
    },
    /// A tool or shell call returned `error`.
    CallError { name: String },
}

impl Observed {
    pub fn to_line(&self) -> String {
        let v = match self {
            Observed::TaskEnd {
                exit_status,
                turns,
                result,
            } => json!({"k": "task_end", "exit_status": exit_status, "turns": turns, "result": result}),
            Observed::CallError { name } => json!({"k": "call_error", "name": name}),
        };
        format!("{v}\n")
    }

    /// A line back; anything else (a torn last line) is skipped.
    pub fn parse(line: &str) -> Option<Observed> {
        let v: Value = serde_json::from_str(line).ok()?;
        match v.get("k")?.as_str()? {
            "task_end" => Some(Observed::TaskEnd {
                exit_status: v.get("exit_status")?.as_str()?.to_string(),
                turns: u32::try_from(v.get("turns")?.as_u64()?).ok()?,
                result: v.get("result")?.as_str()?.to_string(),
            }),
            "call_error" => Some(Observed::CallError {
                name: v.get("name")?.as_str()?.to_string(),
            }),
            _ => None,
        }
    }
}

/// The scorers and the dataset case, from the entry's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub exit_ok: bool,
    pub turn_limit: Option<u64>,
    pub tool_errors: Option<u64>,
    pub result_matches: Option<String>,
    pub file_exists: Option<String>,
    pub dataset: Option<(String, String)>,
}

impl Config {
    /// Parse the config's JSON text (absent: no scorer).
    pub fn parse(text: Option<&str>) -> Result<Config, String> {
        let Some(text) = text else {
            return Ok(Config::default());
        };
        let v: Value = serde_json::from_str(text).map_err(|e| format!("config is not JSON: {e}"))?;
        let empty = Map::new();
        let scorers = match v.get("scorers") {
            None => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => return Err("config.scorers is not a mapping".into()),
        };
        let mut c = Config::default();
        for (k, val) in scorers {
            match k.as_str() {
                "exit_ok" => {
                    c.exit_ok = val
                        .as_bool()
                        .ok_or("config.scorers.exit_ok is not true or false")?
                }
                "turn_limit" => {
                    c.turn_limit = Some(
                        val.as_u64()
                            .ok_or("config.scorers.turn_limit is not a whole number")?,
                    )
                }
                "tool_errors" => {
                    c.tool_errors = Some(
                        val.as_u64()
                            .ok_or("config.scorers.tool_errors is not a whole number")?,
                    )
                }
                "result_matches" => {
                    c.result_matches = Some(
                        val.as_str()
                            .ok_or("config.scorers.result_matches is not text")?
                            .into(),
                    )
                }
                "file_exists" => {
                    c.file_exists = Some(
                        val.as_str()
                            .ok_or("config.scorers.file_exists is not a path")?
                            .into(),
                    )
                }
                other => return Err(format!("config.scorers.{other} is not a scorer of this hook")),
            }
        }
        let text_of = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        if [text_of("dataset_id"), text_of("case_id")]
            .iter()
            .flatten()
            .any(|t| t.is_empty() || t.len() > 200)
        {
            return Err("config.dataset_id and config.case_id are 1 to 200 bytes".into());
        }
        c.dataset = match (text_of("dataset_id"), text_of("case_id")) {
            (Some(d), Some(case)) => Some((d, case)),
            (None, None) => None,
            _ => return Err("config names one of dataset_id and case_id without the other".into()),
        };
        Ok(c)
    }
}

fn verdict(ts: u64, turn: Option<u32>, event: &str, scorer: &str, pass: bool, reason: String) -> Value {
    json!({"type": "event_score", "ts": ts, "turn": turn, "event_type": event, "scorer": scorer,
        "result": if pass { "pass" } else { "fail" }, "score": if pass { 1 } else { 0 }, "reason": reason})
}

/// The records of `eval.jsonl`, one JSON text per line, at time `ts` (unix ms).
/// `file_exists` answers whether a path exists where the hook can look.
pub fn records(c: &Config, seen: &[Observed], ts: u64, file_exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<Value> = Vec::new();
    let tasks: Vec<(&str, u32, &str)> = seen
        .iter()
        .filter_map(|o| match o {
            Observed::TaskEnd {
                exit_status,
                turns,
                result,
            } => Some((exit_status.as_str(), *turns, result.as_str())),
            Observed::CallError { .. } => None,
        })
        .collect();
    let per_task = |out: &mut Vec<Value>, scorer: &str, judge: &dyn Fn(&str, u32, &str) -> (bool, String)| {
        if tasks.is_empty() {
            out.push(verdict(
                ts,
                None,
                "session_end",
                scorer,
                false,
                "no task ended".into(),
            ));
        }
        for (status, turns, result) in &tasks {
            let (pass, reason) = judge(status, *turns, result);
            out.push(verdict(ts, Some(*turns), "task_end", scorer, pass, reason));
        }
    };
    if c.exit_ok {
        per_task(&mut out, "exit_ok", &|status, _, _| {
            (status == "ok", format!("the task ended {status}"))
        });
    }
    if let Some(max) = c.turn_limit {
        per_task(&mut out, "turn_limit", &|_, turns, _| {
            (u64::from(turns) <= max, format!("{turns} turns (at most {max})"))
        });
    }
    if let Some(pattern) = &c.result_matches {
        per_task(&mut out, "result_matches", &|_, _, result| {
            let hit = result.contains(pattern.as_str());
            let word = if hit { "contains" } else { "does not contain" };
            (hit, format!("the result {word} {pattern:?}"))
        });
    }
    if let Some(max) = c.tool_errors {
        let failed: Vec<&str> = seen
            .iter()
            .filter_map(|o| match o {
                Observed::CallError { name } => Some(name.as_str()),
                Observed::TaskEnd { .. } => None,
            })
            .collect();
        let n = failed.len() as u64;
        let reason = format!("{n} failed tool calls (at most {max}){}", named(&failed));
        out.push(verdict(ts, None, "session_end", "tool_errors", n <= max, reason));
    }
    if let Some(path) = &c.file_exists {
        let hit = file_exists(path);
        let word = if hit { "exists" } else { "does not exist" };
        out.push(verdict(
            ts,
            None,
            "session_end",
            "file_exists",
            hit,
            format!("{path} {word}"),
        ));
    }
    let mut lines: Vec<String> = out.iter().map(Value::to_string).collect();
    if let Some((dataset, case)) = &c.dataset {
        lines.push(dataset_run(&out, dataset, case, ts).to_string());
    }
    lines
}

/// The first names of the failed calls (a record line stays short whatever the session did).
fn named(failed: &[&str]) -> String {
    const SHOWN: usize = 10;
    let names: Vec<String> = failed
        .iter()
        .take(SHOWN)
        .map(|n| n.chars().take(64).collect())
        .collect();
    match failed.len() {
        0 => String::new(),
        n if n > SHOWN => format!(": {} and {} more", names.join(", "), n - SHOWN),
        _ => format!(": {}", names.join(", ")),
    }
}

/// The case's verdict: each scorer's share of passing records, pass when all passed.
fn dataset_run(scores: &[Value], dataset: &str, case: &str, ts: u64) -> Value {
    let mut per: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
    for v in scores {
        let scorer = v["scorer"].as_str().unwrap_or("").to_string();
        let e = per.entry(scorer).or_insert((0, 0));
        e.1 += 1;
        if v["result"] == "pass" {
            e.0 += 1;
        }
    }
    let overall = if per.is_empty() {
        "no_scores"
    } else if per.values().all(|(pass, n)| pass == n) {
        "pass"
    } else {
        "fail"
    };
    let shares: Map<String, Value> = per
        .into_iter()
        .map(|(k, (pass, n))| (k, json!(pass as f64 / n as f64)))
        .collect();
    json!({"type": "dataset_run", "ts": ts, "dataset_id": dataset, "case_id": case,
        "overall": overall, "scores": shares})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(status: &str, turns: u32, result: &str) -> Observed {
        Observed::TaskEnd {
            exit_status: status.into(),
            turns,
            result: result.into(),
        }
    }

    #[test]
    fn observed_lines_round_trip_and_a_torn_one_is_skipped() {
        for o in [
            task("ok", 3, "done\n\"x\""),
            Observed::CallError { name: "ls".into() },
        ] {
            assert_eq!(Observed::parse(o.to_line().trim_end()), Some(o));
        }
        assert_eq!(Observed::parse("{\"k\":\"task_end\",\"exit"), None);
    }

    #[test]
    fn config_names_known_scorers_only() {
        let c = Config::parse(Some(
            r#"{"scorers":{"exit_ok":true,"turn_limit":5,"tool_errors":0,"result_matches":"done","file_exists":"out/x"},"dataset_id":"d","case_id":"c"}"#,
        ))
        .unwrap();
        assert!(c.exit_ok);
        assert_eq!((c.turn_limit, c.tool_errors), (Some(5), Some(0)));
        assert_eq!(c.dataset, Some(("d".into(), "c".into())));
        assert_eq!(Config::parse(None).unwrap(), Config::default());
        assert_eq!(
            Config::parse(Some(r#"{"scorers":{"vibes":1}}"#)),
            Err("config.scorers.vibes is not a scorer of this hook".into())
        );
        assert!(Config::parse(Some(r#"{"dataset_id":"d"}"#)).is_err());
    }

    #[test]
    fn each_scorer_judges_what_was_observed() {
        let c = Config::parse(Some(
            r#"{"scorers":{"exit_ok":true,"turn_limit":2,"tool_errors":0,"result_matches":"done","file_exists":"out/x"},"dataset_id":"d","case_id":"c"}"#,
        ))
        .unwrap();
        let seen = [
            task("ok", 3, "all done"),
            Observed::CallError { name: "ls".into() },
        ];
        let lines = records(&c, &seen, 7, &|p| p == "out/x");
        let v: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let pick = |s: &str| v.iter().find(|r| r["scorer"] == s).unwrap().clone();
        assert_eq!(pick("exit_ok")["result"], "pass");
        assert_eq!(pick("turn_limit")["reason"], "3 turns (at most 2)");
        assert_eq!(pick("turn_limit")["result"], "fail");
        assert_eq!(
            pick("tool_errors")["reason"],
            "1 failed tool calls (at most 0): ls"
        );
        assert_eq!(pick("result_matches")["result"], "pass");
        assert_eq!(pick("file_exists")["result"], "pass");
        let run = v.last().unwrap();
        assert_eq!(run["type"], "dataset_run");
        assert_eq!(run["overall"], "fail");
        assert_eq!(run["scores"]["exit_ok"], 1.0);
        assert_eq!(run["scores"]["turn_limit"], 0.0);
        let many: Vec<Observed> = (0..30)
            .map(|i| Observed::CallError {
                name: format!("t{i}"),
            })
            .collect();
        let v: Value = serde_json::from_str(
            &records(&c, &many, 7, &|_| true)[0..]
                .iter()
                .find(|l| l.contains("tool_errors"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            v["reason"],
            "30 failed tool calls (at most 0): t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 and 20 more"
        );
        let none = records(&Config::default(), &seen, 7, &|_| false);
        assert!(none.is_empty());
        let idle = records(&c, &[], 7, &|_| false);
        let v: Value = serde_json::from_str(&idle[0]).unwrap();
        assert_eq!(
            (v["event_type"].as_str(), v["reason"].as_str()),
            (Some("session_end"), Some("no task ended"))
        );
    }
}
