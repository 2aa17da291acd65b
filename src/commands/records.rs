//! `mur records prune [--dry-run] [--json]`: apply the records retention policy (the
//! `records:` block of `~/.config/murmur/config.yaml`, else the defaults) to the records
//! root now, and print what was removed (or would be) and the bytes freed. The same pass
//! `mur run` starts in the background at launch ([`crate::retention`]).

use crate::diag::{code, Diagnostic};
use crate::retention::prune::{self, Report};
use crate::retention::Policy;
use serde_json::json;

/// The flags of `mur records prune`.
#[derive(Debug, Default)]
pub struct PruneOptions {
    pub dry_run: bool,
    pub json: bool,
}

/// Prune the records root; the report to print.
pub fn prune(o: &PruneOptions) -> Result<String, Diagnostic> {
    let root = crate::places::records_root().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            "neither MURMUR_RECORDS_DIR nor HOME is set: there is no records root to prune",
        )
    })?;
    let policy = Policy::load()?;
    let opts = prune::Options {
        policy,
        dry_run: o.dry_run,
        current: None,
        wait: true,
        now: crate::clock::now_ms() / 1000,
    };
    let report = prune::prune(&root, &opts)
        .map_err(|why| Diagnostic::new(code::IO_READ, "MURMUR_RECORDS_DIR", why))?;
    let out = if o.json {
        as_json(&report, &policy, o.dry_run)
    } else {
        as_text(&report, &policy, o.dry_run)
    };
    match report.errors.first() {
        Some(first) => {
            crate::diag::write_stdout(&out)?;
            Err(Diagnostic::new(
                code::IO_READ,
                "MURMUR_RECORDS_DIR",
                format!("{} removal(s) failed, the first: {first}", report.errors.len()),
            ))
        }
        None => Ok(out),
    }
}

/// The report for a person: one line per session removed, then the totals.
fn as_text(r: &Report, p: &Policy, dry_run: bool) -> String {
    let (verb, freed) = if dry_run {
        ("would remove", "would free")
    } else {
        ("removed", "freed")
    };
    let mut out = String::new();
    for x in &r.removed {
        out.push_str(&format!(
            "{verb} {}  {} bytes, {} days old ({})\n",
            x.session, x.bytes, x.age_days, x.reason
        ));
        if let Some(w) = &x.child_workdir {
            out.push_str(&format!("  with its child workdir {}\n", w.display()));
        }
    }
    out.push_str(&format!(
        "{verb} {} sessions, {freed} {} bytes; left {} sessions ({} bytes); {} live or in use, {} kept on purpose; policy: {}\n",
        r.removed.len(),
        r.freed,
        r.sessions,
        r.bytes,
        r.live,
        r.kept,
        p.describe()
    ));
    if r.busy {
        out.push_str("another prune was running: nothing was done\n");
    }
    out
}

/// The report as one JSON object.
fn as_json(r: &Report, p: &Policy, dry_run: bool) -> String {
    let removed: Vec<_> = r
        .removed
        .iter()
        .map(|x| {
            json!({
                "session": x.session,
                "bytes": x.bytes,
                "age_days": x.age_days,
                "reason": x.reason,
                "child_workdir": x.child_workdir.as_ref().map(|w| w.display().to_string()),
            })
        })
        .collect();
    let v = json!({
        "dry_run": dry_run,
        "removed": removed,
        "freed_bytes": r.freed,
        "left": {"sessions": r.sessions, "bytes": r.bytes},
        "live": r.live,
        "kept": r.kept,
        "errors": r.errors,
        "busy": r.busy,
        "policy": {
            "max_age_days": p.max_age_days,
            "max_sessions": p.max_sessions,
            "max_bytes": p.max_bytes,
            "prune_at_launch": p.at_launch,
        },
    });
    format!("{v}\n")
}
