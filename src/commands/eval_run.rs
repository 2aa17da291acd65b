//! `mur eval run --manifest M --dataset FILE [--variant M2] [--repeat K] [--jobs N]
//! [--session-timeout SECS] [--json] [--junit FILE]`: every case of a dataset (see
//! [`crate::eval_view::dataset`]), K times, for the capsule and its variant, each as its own
//! contained session ([`super::eval_case`]), N at once (default: the cores). A progress line
//! per finished case goes to stderr; at the end a table (cases × variants: passes of K),
//! each variant's pass rate, pass^k (the share of cases whose K runs all passed), wall time
//! and tokens; or that as one JSON object; a JUnit XML file on request. Every path named is
//! taken against the caller's directory, and the dataset and each capsule are checked before
//! the first case starts. SIGINT or SIGTERM ends the running cases, starts no more and
//! prints what finished: a run it ended is interrupted, reported so and left out of every
//! figure (neither a pass nor a failure). Exit 0 when every run of every case passed, 1
//! otherwise.

use super::eval_case::{run_case, CaseEnv, CaseResult};
use crate::diag::{code, Diagnostic};
use crate::eval_view::dataset::{self, Case};
use crate::fsx::{self, Dir};
use crate::trace_view::clean;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The flags of `mur eval run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub manifest: PathBuf,
    pub variant: Option<PathBuf>,
    pub registry: Option<PathBuf>,
    pub dataset: PathBuf,
    pub repeat: u32,
    pub jobs: usize,
    pub session_timeout_secs: u64,
    pub json: bool,
    pub junit: Option<PathBuf>,
}

/// The largest dataset read, bytes.
const MAX_DATASET: u64 = 16 << 20;
/// A session's default deadline, seconds.
pub const SESSION_TIMEOUT: u64 = 600;

/// One finished run of one case.
#[derive(Debug, Clone)]
struct Done {
    variant: usize,
    case: usize,
    k: u32,
    result: CaseResult,
}

fn err(key: &str, message: String) -> Diagnostic {
    Diagnostic::new(code::IO_READ, key, message)
}

/// The dataset's directory and its cases, every path checked to exist beneath it.
fn load(path: &Path) -> Result<(Dir, Vec<Case>), Diagnostic> {
    let shown = path.display();
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir =
        Dir::open(parent).map_err(|e| err("--dataset", format!("cannot open {}: {e}", parent.display())))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| err("--dataset", format!("{shown} names no file")))?;
    let bytes = dir
        .read(name, MAX_DATASET)
        .map_err(|e| err("--dataset", format!("cannot read {shown}: {e}")))?;
    let cases =
        dataset::parse(&bytes).map_err(|(n, why)| err("--dataset", format!("{shown} line {n}: {why}")))?;
    for c in &cases {
        dir.read(&c.task_path, super::eval_case::MAX_TASK).map_err(|e| {
            err(
                "--dataset",
                format!(
                    "{shown} case {}: task_path {}: {e}",
                    c.case_id,
                    clean(&c.task_path, 200)
                ),
            )
        })?;
        if let Some(s) = &c.start {
            super::eval_case::start_files(&dir, s)
                .map_err(|why| err("--dataset", format!("{shown} case {}: {why}", c.case_id)))?;
        }
    }
    Ok((dir, cases))
}

/// The run's own directory: `$MURMUR_EVAL_DIR`, else `$HOME/.murmur/eval`, then `<run id>`.
fn run_dir(run_id: &str) -> Result<(Dir, PathBuf), Diagnostic> {
    let root = std::env::var_os("MURMUR_EVAL_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".murmur/eval")))
        .ok_or_else(|| {
            err(
                "MURMUR_EVAL_DIR",
                "neither MURMUR_EVAL_DIR nor HOME is set".into(),
            )
        })?;
    let root = absolute("MURMUR_EVAL_DIR", &root)?;
    let dir = fsx::private_dir(&root, run_id)
        .map_err(|e| err("MURMUR_EVAL_DIR", format!("cannot make the run's directory: {e}")))?;
    Ok((dir, root.join(run_id)))
}

/// `p` made absolute against this process's working directory: every case's `mur run` and
/// `mur exec` start in `/`, so no path may reach them relative.
fn absolute(key: &str, p: &Path) -> Result<PathBuf, Diagnostic> {
    std::path::absolute(p).map_err(|e| err(key, format!("cannot resolve {} ({key}): {e}", p.display())))
}

/// `o` with every path it names made absolute (see [`absolute`]).
fn absolute_paths(o: &RunOptions) -> Result<RunOptions, Diagnostic> {
    Ok(RunOptions {
        manifest: absolute("--manifest", &o.manifest)?,
        variant: o
            .variant
            .as_deref()
            .map(|v| absolute("--variant", v))
            .transpose()?,
        registry: o
            .registry
            .as_deref()
            .map(|r| absolute("--registry-path", r))
            .transpose()?,
        dataset: absolute("--dataset", &o.dataset)?,
        junit: o.junit.as_deref().map(|j| absolute("--junit", j)).transpose()?,
        ..o.clone()
    })
}

/// The capsule and its variant, each loaded as its sessions will load it (`${NAME}` from
/// this environment, which they inherit), before any case starts: one that cannot run fails
/// the evaluation once, naming its file, rather than every run of it.
fn capsules(o: &RunOptions) -> Result<Vec<PathBuf>, Diagnostic> {
    use crate::manifest::{load_file, process_env, Resolve};
    let named = std::iter::once(("--manifest", &o.manifest));
    let named = named.chain(o.variant.iter().map(|v| ("--variant", v)));
    let mut variants = Vec::new();
    for (flag, path) in named {
        load_file(path, Resolve::All(&process_env)).map_err(|d| naming(d, flag, path))?;
        variants.push(path.clone());
    }
    Ok(variants)
}

/// `d` about the manifest `path` given as `flag`, saying so, and that nothing ran.
fn naming(mut d: Diagnostic, flag: &str, path: &Path) -> Diagnostic {
    let shown = path.display().to_string();
    if !d.message.contains(&shown) {
        let rest = d.message.strip_prefix("murmur.yaml: ").unwrap_or(&d.message);
        d.message = format!("{shown} ({flag}): {rest}");
    }
    if d.hint.is_none() {
        d.hint = Some("nothing was run: every capsule is checked before the first case".into());
    }
    d
}

/// Run the evaluation; the text (or JSON) to print, and whether every run passed.
pub fn run(o: &RunOptions, exe: &Path) -> Result<(String, bool), Diagnostic> {
    let o = &absolute_paths(o)?;
    let (dataset_dir, cases) = load(&o.dataset)?;
    let variants = capsules(o)?;
    let run_id = crate::token::random_hex16()
        .map(|h| format!("evr_{h}"))
        .map_err(|e| err("", format!("no randomness for the run id: {e}")))?;
    let (run_dir, run_path) = run_dir(&run_id)?;
    let records_root = crate::places::records_root().ok_or_else(|| {
        err(
            "MURMUR_RECORDS_DIR",
            "neither MURMUR_RECORDS_DIR nor HOME is set".into(),
        )
    })?;
    let records_root = absolute("MURMUR_RECORDS_DIR", &records_root)?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(&stop);
    let started = Instant::now();
    let done = execute(
        o,
        exe,
        &variants,
        &cases,
        (&dataset_dir, &run_dir, &records_root),
        &stop,
    );
    let wall_ms = started.elapsed().as_millis() as u64;
    let report = Report {
        run_id: &run_id,
        run_path: &run_path,
        variants: &variants,
        cases: &cases,
        repeat: o.repeat,
        done: &done,
        wall_ms,
        interrupted: stop.load(Ordering::SeqCst),
    };
    let mut all =
        done.len() == variants.len() * cases.len() * o.repeat as usize && done.iter().all(|d| d.result.pass);
    if let Some(j) = &o.junit {
        // A JUnit file that cannot be written fails the run, never the report.
        if let Err(e) = fsx::write_output(j, report.junit().as_bytes()) {
            eprintln!("{}", err("--junit", format!("cannot write {}: {e}", j.display())));
            all = false;
        }
    }
    let text = if o.json {
        format!("{}\n", report.json())
    } else {
        report.table()
    };
    Ok((text, all))
}

/// SIGINT or SIGTERM sets `stop` (they are blocked here so the signal thread takes them).
fn watch_signals(stop: &Arc<AtomicBool>) {
    if crate::signals::block_termination().is_err() {
        return;
    }
    let stop = Arc::clone(stop);
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        if crate::signals::wait_for_termination().is_ok() {
            stop.store(true, Ordering::SeqCst);
        }
    });
}

/// Every (variant, case, k) on `o.jobs` workers; the runs that finished, progress on stderr.
fn execute(
    o: &RunOptions,
    exe: &Path,
    variants: &[PathBuf],
    cases: &[Case],
    (dataset_dir, run_dir, records_root): (&Dir, &Dir, &Path),
    stop: &Arc<AtomicBool>,
) -> Vec<Done> {
    let mut work = Vec::new();
    for k in 1..=o.repeat {
        for v in 0..variants.len() {
            for c in 0..cases.len() {
                work.push((v, c, k));
            }
        }
    }
    let total = work.len();
    let queue = Mutex::new(work.into_iter());
    let (tx, rx) = mpsc::channel::<Done>();
    let mut done = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..o.jobs.max(1) {
            let (tx, queue) = (tx.clone(), &queue);
            s.spawn(move || loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((v, c, k)) = next else { break };
                let env = CaseEnv {
                    exe,
                    manifest: &variants[v],
                    registry: o.registry.as_deref(),
                    dataset_dir,
                    run_dir,
                    records_root,
                    session_timeout: Duration::from_secs(o.session_timeout_secs),
                    stop,
                };
                let name = format!("v{}-{}-{k}", v + 1, cases[c].case_id);
                let result = run_case(&env, &cases[c], &name);
                if tx
                    .send(Done {
                        variant: v,
                        case: c,
                        k,
                        result,
                    })
                    .is_err()
                {
                    break;
                }
            });
        }
        drop(tx);
        for d in rx {
            let (word, why) = match (d.result.pass, d.result.interrupted) {
                (true, _) => ("pass", String::new()),
                (false, true) => ("interrupted", " (not counted)".to_string()),
                (false, false) => ("FAIL", format!(": {}", d.result.reason)),
            };
            let _ = writeln!(
                std::io::stderr(),
                "[{}/{total}] variant {} case {} run {}: {word} ({:.1} s){why}",
                done.len() + 1,
                d.variant + 1,
                cases[d.case].case_id,
                d.k,
                d.result.wall_ms as f64 / 1000.0
            );
            done.push(d);
        }
    });
    done
}

/// What the run came to.
struct Report<'a> {
    run_id: &'a str,
    run_path: &'a Path,
    variants: &'a [PathBuf],
    cases: &'a [Case],
    repeat: u32,
    done: &'a [Done],
    wall_ms: u64,
    interrupted: bool,
}

/// A variant's figures: runs, passes, pass rate, pass^k, tokens. An interrupted run is in
/// no figure but its own count, its tokens and its time.
struct Figures {
    runs: u64,
    interrupted: u64,
    passes: u64,
    all_k: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// The variant's runs' own wall time, summed (they overlap under `--jobs`).
    run_ms: u64,
}

impl Report<'_> {
    /// The runs of case `c` under variant `v` that ended, interrupted ones too, by `k`.
    fn runs(&self, v: usize, c: usize) -> Vec<&Done> {
        let mut r: Vec<&Done> = self
            .done
            .iter()
            .filter(|d| d.variant == v && d.case == c)
            .collect();
        r.sort_by_key(|d| d.k);
        r
    }

    /// The runs that count: those that finished (an interrupted one is neither a pass nor a
    /// failure).
    fn counted(&self, v: usize, c: usize) -> Vec<&Done> {
        let mut r = self.runs(v, c);
        r.retain(|d| !d.result.interrupted);
        r
    }

    fn figures(&self, v: usize) -> Figures {
        let mut f = Figures {
            runs: 0,
            interrupted: 0,
            passes: 0,
            all_k: 0,
            input_tokens: 0,
            output_tokens: 0,
            run_ms: 0,
        };
        for c in 0..self.cases.len() {
            let counted = self.counted(v, c);
            let passed = counted.iter().filter(|d| d.result.pass).count();
            if counted.len() == self.repeat as usize && passed == counted.len() {
                f.all_k += 1;
            }
            f.runs += counted.len() as u64;
            f.passes += passed as u64;
            // What an interrupted run spent was spent all the same.
            for d in self.runs(v, c) {
                f.interrupted += u64::from(d.result.interrupted);
                f.input_tokens += d.result.input_tokens;
                f.run_ms += d.result.wall_ms;
                f.output_tokens += d.result.output_tokens;
            }
        }
        f
    }

    fn rate(n: u64, of: u64) -> f64 {
        crate::eval_view::ratio(n as f64, of)
    }

    fn table(&self) -> String {
        let mut out = String::new();
        if self.interrupted {
            out.push_str("interrupted: the table holds the runs that finished (passes of them); a run the interrupt ended is not counted\n");
        }
        out.push_str(&format!("{:<24}", "case"));
        for v in 0..self.variants.len() {
            out.push_str(&format!(" {:>12}", format!("variant {}", v + 1)));
        }
        out.push('\n');
        for (c, case) in self.cases.iter().enumerate() {
            out.push_str(&format!("{:<24}", crate::trace_view::clean(&case.case_id, 24)));
            for v in 0..self.variants.len() {
                let counted = self.counted(v, c);
                let passed = counted.iter().filter(|d| d.result.pass).count();
                out.push_str(&format!(" {:>12}", format!("{passed}/{}", counted.len())));
            }
            out.push('\n');
        }
        for (v, m) in self.variants.iter().enumerate() {
            let f = self.figures(v);
            let interrupted = match f.interrupted {
                0 => String::new(),
                n => format!("; {n} interrupted, not counted"),
            };
            out.push_str(&format!(
                "variant {} ({}): pass rate {:.1}% ({} of {} runs{interrupted}), pass^{} {:.1}%, tokens {} in / {} out, runs {:.1} s in all\n",
                v + 1,
                m.display(),
                Self::rate(f.passes, f.runs) * 100.0,
                f.passes,
                f.runs,
                self.repeat,
                Self::rate(f.all_k, self.cases.len() as u64) * 100.0,
                f.input_tokens,
                f.output_tokens,
                f.run_ms as f64 / 1000.0
            ));
        }
        out.push_str(&format!(
            "wall time {:.1} s; workdirs under {}\n",
            self.wall_ms as f64 / 1000.0,
            self.run_path.display()
        ));
        out
    }

    fn json(&self) -> Value {
        let variants: Vec<Value> = self
            .variants
            .iter()
            .enumerate()
            .map(|(v, m)| {
                let f = self.figures(v);
                let cases: Vec<Value> = self
                    .cases
                    .iter()
                    .enumerate()
                    .map(|(c, case)| {
                        let runs: Vec<Value> = self
                            .runs(v, c)
                            .iter()
                            .map(|d| {
                                let r = &d.result;
                                json!({"run": d.k, "pass": r.pass, "interrupted": r.interrupted, "reason": r.reason, "session_id": r.session_id,
                                    "workdir": r.workdir, "wall_ms": r.wall_ms,
                                    "input_tokens": r.input_tokens, "output_tokens": r.output_tokens})
                            })
                            .collect();
                        json!({"case_id": case.case_id, "runs": runs})
                    })
                    .collect();
                json!({"variant": v + 1, "manifest": m.display().to_string(), "runs": f.runs, "passes": f.passes,
                    "interrupted": f.interrupted,
                    "pass_rate": Self::rate(f.passes, f.runs),
                    "pass_hat_k": Self::rate(f.all_k, self.cases.len() as u64),
                    "input_tokens": f.input_tokens, "output_tokens": f.output_tokens, "run_ms": f.run_ms, "cases": cases})
            })
            .collect();
        json!({"run_id": self.run_id, "repeat": self.repeat, "wall_ms": self.wall_ms,
            "interrupted": self.interrupted, "workdirs": self.run_path.display().to_string(),
            "variants": variants})
    }

    /// JUnit XML: a suite per variant, a test case per dataset case and run. Every suite
    /// carries what Jenkins' JUnit schema requires (`name`, `tests`, `failures`, `errors`);
    /// a run that did not pass is a failure (none is an `error`: the check, or the session,
    /// is the test), one that never ran or was interrupted is skipped.
    fn junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
        for v in 0..self.variants.len() {
            let f = self.figures(v);
            let planned = self.cases.len() as u64 * u64::from(self.repeat);
            out.push_str(&format!(
                "  <testsuite name=\"variant {}\" tests=\"{planned}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">\n",
                v + 1,
                f.runs - f.passes,
                planned - f.runs,
                f.run_ms as f64 / 1000.0
            ));
            for (c, case) in self.cases.iter().enumerate() {
                let runs = self.runs(v, c);
                // A run that never happened (the evaluation was interrupted) is a skipped test.
                for k in (1..=self.repeat).filter(|k| !runs.iter().any(|d| d.k == *k)) {
                    out.push_str(&format!(
                        "    <testcase classname=\"variant {}\" name=\"{}#{k}\" time=\"0\">\n      <skipped message=\"not run: the evaluation was interrupted\"/>\n    </testcase>\n",
                        v + 1,
                        xml(&case.case_id)
                    ));
                }
                for d in runs {
                    out.push_str(&format!(
                        "    <testcase classname=\"variant {}\" name=\"{}#{}\" time=\"{:.3}\"",
                        v + 1,
                        xml(&case.case_id),
                        d.k,
                        d.result.wall_ms as f64 / 1000.0
                    ));
                    if d.result.pass {
                        out.push_str("/>\n");
                    } else if d.result.interrupted {
                        out.push_str(">\n      <skipped message=\"interrupted: SIGINT or SIGTERM ended it; not counted\"/>\n    </testcase>\n");
                    } else {
                        out.push_str(&format!(
                            ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                            xml(&d.result.reason)
                        ));
                    }
                }
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }
}

/// Text safe inside an XML attribute: the five escapes, and no control character.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Not XML (controls, U+FFFE/U+FFFF) or able to reorder a reader's text (bidi).
            c if c.is_control()
                || matches!(c, '\u{fffe}' | '\u{ffff}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push(' ')
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn xml_attributes_are_escaped_and_carry_no_control_character() {
        assert_eq!(
            xml("a<b>&\"c'\u{1b}\u{202e}\u{ffff}"),
            "a&lt;b&gt;&amp;&quot;c&apos;   "
        );
    }
}
