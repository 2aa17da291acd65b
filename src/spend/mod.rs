//! Spend ceilings, the parts below the runtime: the defaults, the user's per-day ceiling
//! (`spend.machine_tokens_per_day` in `~/.config/murmur/config.yaml`), the chain of session
//! ceilings a delegated child is handed (`MURMUR_SPEND_CHAIN`), and the per-user ledger
//! every session of the user charges ([`ledger`] its format, [`store`] the file).
//!
//! The ledger lives in the user's own spend directory (`$MURMUR_SPEND_DIR`, else
//! `~/.murmur/spend`), never in a workdir: no guest or contained child can reach it (a
//! guest's only preopen is the workdir, a contained child's writable tree is the workdir,
//! and neither is given `HOME`).

pub mod ledger;
pub mod store;

use std::path::PathBuf;

/// `inference.max_session_tokens` when the manifest names none (defined with the manifest's
/// other defaults).
pub use crate::manifest::model::DEFAULT_MAX_SESSION_TOKENS as DEFAULT_SESSION_TOKENS;
/// `spend.machine_tokens_per_day` when the user's config names none: ten default sessions'
/// worth a day, for all of the user's sessions together.
pub const DEFAULT_MACHINE_TOKENS_PER_DAY: u64 = 20_000_000;
/// The variable a delegating session hands its child: the session ceilings above it.
pub const CHAIN_VAR: &str = "MURMUR_SPEND_CHAIN";
/// The most sessions a chain names (delegation depth is far smaller).
pub const MAX_CHAIN: usize = 16;
/// Largest config file read (the size `mur install` reads).
const MAX_CONFIG: u64 = 64 * 1024;

/// The user's per-day ceiling as the config says it: its value, and the file it came from
/// (None: no config file, the default holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineCeiling {
    pub tokens_per_day: u64,
    pub from: Option<PathBuf>,
}

/// `spend.machine_tokens_per_day` of a config file's text (None: not set). A set value
/// must be a whole number greater than 0.
pub fn parse_machine_ceiling(text: &str) -> Result<Option<u64>, String> {
    let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let Some(spend) = v.get("spend") else {
        return Ok(None);
    };
    if !spend.is_mapping() {
        return Err("spend is not a mapping".into());
    }
    match spend.get("machine_tokens_per_day") {
        None => Ok(None),
        Some(n) => match n.as_u64() {
            Some(0) | None => {
                Err("spend.machine_tokens_per_day must be a whole number greater than 0".into())
            }
            Some(n) => Ok(Some(n)),
        },
    }
}

/// The user's per-day ceiling, read from `crate::places::user_config_file` with the reader
/// `mur install` uses; a file that cannot be read or says something invalid is an error
/// naming it (never silently the default).
pub fn machine_ceiling() -> Result<MachineCeiling, String> {
    let default = MachineCeiling {
        tokens_per_day: DEFAULT_MACHINE_TOKENS_PER_DAY,
        from: None,
    };
    let Some(path) = crate::places::user_config_file() else {
        return Ok(default);
    };
    let bytes = match crate::registry::store::read_small(&path, MAX_CONFIG) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(default),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    let set = parse_machine_ceiling(&text).map_err(|why| format!("{}: {why}", path.display()))?;
    Ok(MachineCeiling {
        tokens_per_day: set.unwrap_or(DEFAULT_MACHINE_TOKENS_PER_DAY),
        from: set.map(|_| path),
    })
}

/// The ledger of this user: in `crate::places::spend_dir`.
pub fn user_store() -> Option<store::Store> {
    crate::places::spend_dir().map(store::Store::at)
}

/// Parse [`CHAIN_VAR`]: `ses_<hex>=<tokens>` for each session above, root first, joined
/// by `,` (empty: none).
pub fn parse_chain(v: &str) -> Result<Vec<(String, u64)>, String> {
    if v.is_empty() {
        return Ok(Vec::new());
    }
    let items: Vec<&str> = v.split(',').collect();
    if items.len() > MAX_CHAIN {
        return Err(format!("it names more than {MAX_CHAIN} sessions"));
    }
    items
        .into_iter()
        .map(|item| {
            let (id, n) = item
                .split_once('=')
                .ok_or_else(|| "an entry is not ses_ID=TOKENS".to_string())?;
            if !ledger::is_session(id) {
                return Err("an entry does not name a session id".into());
            }
            let n: u64 = n
                .parse()
                .map_err(|_| "an entry's ceiling is not a whole number".to_string())?;
            Ok((id.to_string(), n))
        })
        .collect()
}

/// [`CHAIN_VAR`]'s value for `chain`.
pub fn render_chain(chain: &[(String, u64)]) -> String {
    chain
        .iter()
        .map(|(id, n)| format!("{id}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_key_is_a_positive_whole_number() {
        assert_eq!(parse_machine_ceiling("registry: {sources: []}\n"), Ok(None));
        assert_eq!(
            parse_machine_ceiling("spend:\n  machine_tokens_per_day: 500\n"),
            Ok(Some(500))
        );
        for bad in [
            "spend: 5",
            "spend: {machine_tokens_per_day: 0}",
            "spend: {machine_tokens_per_day: -1}",
            "spend: {machine_tokens_per_day: lots}",
            "spend: {machine_tokens_per_day: 1.5}",
            "spend: [",
        ] {
            assert!(parse_machine_ceiling(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn chains_round_trip_and_refuse_what_is_not_one() {
        let a = "ses_0123456789abcdef0123456789abcdef".to_string();
        let chain = vec![
            (a.clone(), 2_000_000),
            ("ses_ffffffffffffffffffffffffffffffff".into(), 10),
        ];
        assert_eq!(parse_chain(&render_chain(&chain)), Ok(chain));
        assert_eq!(parse_chain(""), Ok(vec![]));
        let bad = [
            "x=1".to_string(),
            format!("{a}=x"),
            a.clone(),
            format!("{a}=1,"),
            format!("{a}=-1"),
        ];
        for b in bad {
            assert!(parse_chain(&b).is_err(), "{b}");
        }
        let long = vec![format!("{a}=1"); MAX_CHAIN + 1].join(",");
        assert!(parse_chain(&long).is_err());
    }
}
