//! `mur-roost` flags: `--port`, `--registry-path`, `--spawn-allow` (repeatable), the three
//! bounds, `--version` and `-h`/`--help`. Anything else is refused by name.

use crate::cli::{no_value, Arg, ArgError, Args};
use crate::manifest::name_error;
use std::path::PathBuf;

/// The daemon's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    pub registry: PathBuf,
    pub spawn_allow: Vec<String>,
    pub max_depth: u32,
    pub max_concurrent: u32,
    pub max_live_capsules: u32,
    pub version: bool,
    pub help: bool,
}

/// The default machine ceiling: host cores × 8, clamped to 16..=256.
pub fn default_ceiling(cores: Option<usize>) -> u32 {
    let cores = cores.unwrap_or(2) as u64;
    (cores * 8).clamp(16, 256) as u32
}

/// Parse the daemon's arguments (after the program name).
pub fn parse(mut args: Args) -> Result<Config, ArgError> {
    let cores = std::thread::available_parallelism().ok().map(usize::from);
    let mut c = Config {
        port: 7700,
        registry: crate::registry::default_root(),
        spawn_allow: Vec::new(),
        max_depth: 3,
        max_concurrent: 4,
        max_live_capsules: default_ceiling(cores),
        version: false,
        help: false,
    };
    while let Some(arg) = args.next_arg() {
        let (name, inline) = match arg {
            Arg::Flag { name, inline } => (name, inline),
            Arg::Word(w) => return Err(ArgError::Unknown(w)),
        };
        match name.as_str() {
            "--port" => c.port = args.number(&name, inline)?,
            "--registry-path" => c.registry = args.value(&name, inline)?.into(),
            "--spawn-allow" => {
                let value = args.value(&name, inline)?;
                if name_error(&value).is_some() {
                    return Err(ArgError::BadValue {
                        flag: name,
                        value,
                        why: "one capsule name (repeat the flag per name)",
                    });
                }
                c.spawn_allow.push(value);
            }
            "--max-depth" => c.max_depth = args.number(&name, inline)?,
            "--max-concurrent" => c.max_concurrent = args.number(&name, inline)?,
            "--max-live-capsules" => c.max_live_capsules = args.number(&name, inline)?,
            "--version" => {
                no_value(&name, inline)?;
                c.version = true;
            }
            "-h" | "--help" => {
                no_value(&name, inline)?;
                c.help = true;
            }
            _ => return Err(ArgError::Unknown(name)),
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(list: &[&str]) -> Result<Config, ArgError> {
        parse(Args::new(list.iter().map(|s| s.to_string())))
    }

    #[test]
    fn flags() {
        let c = p(&[
            "--port",
            "9",
            "--spawn-allow",
            "a",
            "--spawn-allow=local/b",
            "--max-depth=0",
            "--max-concurrent",
            "2",
            "--max-live-capsules",
            "5",
            "--registry-path",
            "/r",
        ])
        .unwrap();
        assert_eq!(
            (c.port, c.max_depth, c.max_concurrent, c.max_live_capsules),
            (9, 0, 2, 5)
        );
        assert_eq!(c.spawn_allow, ["a", "local/b"]);
        assert_eq!(c.registry, PathBuf::from("/r"));
        assert_eq!(
            p(&["--max-total", "3"]).unwrap_err().to_string(),
            "unknown argument: --max-total"
        );
        assert!(p(&["--spawn-allow", "a,b"]).is_err());
        assert!(p(&["--max-depth", "-1"]).is_err());
        assert!(p(&["--max-depth", "1.5"]).is_err());
        assert!(p(&["--port"]).is_err());
        assert!(p(&["--help"]).unwrap().help);
        assert!(p(&["-h"]).unwrap().help);
    }

    #[test]
    fn ceiling() {
        assert_eq!(default_ceiling(Some(1)), 16);
        assert_eq!(default_ceiling(Some(8)), 64);
        assert_eq!(default_ceiling(Some(64)), 256);
        assert_eq!(default_ceiling(None), 16);
    }
}
