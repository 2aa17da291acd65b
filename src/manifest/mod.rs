//! `murmur.yaml`: parsing, validation with the spec's diagnostic codes, `${NAME}`
//! interpolation, unknown-key warnings, and lowering to a spawn envelope.
//!
//! Three loaders share one pipeline (syntax, unknown keys, identity, interpolation,
//! structure) and differ only in what they resolve: [`Resolve::All`] for `mur run`,
//! [`Resolve::AllButApiKey`] for `mur-roost` (which never reads `inference.api_key`), and
//! [`Resolve::Nothing`] for `mur build` and `mur inspect`.

pub mod envelope;
pub mod interp;
mod known;
pub mod lock;
pub mod model;
pub mod netrule;
mod parse;
mod read;
pub mod units;

pub use envelope::{contains, Envelope};
pub use model::*;
pub use netrule::{NetRule, Scheme};
pub use parse::{name_error, relative_path};

use crate::diag::{code, Diagnostic};
use serde_yaml::Value;
use std::path::Path;

/// Largest manifest read, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 1024 * 1024;

/// Which `${NAME}` references a loader resolves.
pub enum Resolve<'a> {
    /// Every reference, from `lookup` (the runtime's loader).
    All(&'a dyn Fn(&str) -> Option<String>),
    /// Every reference but `inference.api_key` (the daemon's loader).
    AllButApiKey(&'a dyn Fn(&str) -> Option<String>),
    /// None: references stay as written (build and inspect).
    Nothing,
}

/// A parsed manifest and the warnings found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub manifest: Manifest,
    pub warnings: Vec<Diagnostic>,
    /// With [`Resolve::Nothing`]: each `(key, variable)` left unresolved. The manifest holds
    /// a placeholder at those keys, so it is for validation and display, not for running.
    pub unresolved: Vec<(String, String)>,
}

/// Parse and validate manifest text.
pub fn parse(text: &str, resolve: Resolve<'_>) -> Result<Loaded, Diagnostic> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(Diagnostic::new(
            code::MAN_INVALID,
            "",
            format!("murmur.yaml: the manifest is larger than {MAX_MANIFEST_BYTES} bytes"),
        ));
    }
    let mut root: Value = serde_yaml::from_str(text).map_err(|e| {
        let at = e.location().map_or(String::new(), |l| {
            format!(" at line {}, column {}", l.line(), l.column())
        });
        Diagnostic::new(
            code::MAN_SYNTAX,
            "",
            format!("murmur.yaml: YAML syntax error{at}: {e}"),
        )
    })?;
    if !root.is_mapping() {
        return Err(read::invalid(
            "murmur.yaml",
            "the document must be a mapping of keys",
        ));
    }
    let mut warnings = known::unknown_keys(&root);
    let api_key_var = parse::api_key_reference(&root);
    let mut unresolved = Vec::new();
    let resolved = match resolve {
        Resolve::All(lookup) => {
            interp::resolve(&mut root, "", &[], lookup)?;
            true
        }
        Resolve::AllButApiKey(lookup) => {
            interp::resolve(&mut root, "", &["inference.api_key"], lookup)?;
            false
        }
        Resolve::Nothing => {
            interp::placehold(&mut root, "", &["inference.api_key"], &mut unresolved);
            false
        }
    };
    let manifest = parse::manifest(&root, api_key_var.as_deref(), resolved)?;
    if let Some(Inference {
        api_key: Some(ApiKey::Literal(_)),
        ..
    }) = &manifest.inference
    {
        warnings.push(
            Diagnostic::new(
                code::SEC_LITERAL_SECRET,
                "inference.api_key",
                "murmur.yaml: inference.api_key holds a literal secret",
            )
            .with_hint("write it as ${VARIABLE} and set the variable where the capsule runs"),
        );
    }
    Ok(Loaded {
        manifest,
        warnings,
        unresolved,
    })
}

/// The process environment as a lookup.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Read and parse the manifest at `path`: E-IO-001 if it does not exist, E-IO-003 if it
/// cannot be read.
pub fn load_file(path: &Path, resolve: Resolve<'_>) -> Result<Loaded, Diagnostic> {
    let key = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Diagnostic::new(
                code::IO_MANIFEST_MISSING,
                &key,
                format!("manifest not found: {key}"),
            ))
        }
        Err(e) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                &key,
                format!("cannot read {key}: {e}"),
            ))
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        Diagnostic::new(
            code::MAN_SYNTAX,
            &key,
            "murmur.yaml: the manifest is not UTF-8 text",
        )
    })?;
    parse(&text, resolve)
}
