//! The `mur` subcommands' work, kept out of the binary so the binary only parses and
//! dispatches. Each returns its result or one diagnostic; rendering is in [`render`].

pub mod build;
pub mod cancel;
pub mod delegation_check;
pub mod doctor;
mod doctor_fix;
mod doctor_text;
pub mod eval;
mod eval_case;
pub mod eval_run;
pub mod exec;
pub mod help;
pub mod install;
pub mod lock;
pub mod man;
pub mod new;
pub mod oci;
pub mod ps;
pub mod records;
pub mod render;
pub mod sessions;
pub mod stop;
pub mod token;
pub mod trace;
pub mod version;
pub mod watch;

pub use build::{build, Built};

/// Write the rendered `page` to `out` whole (temp file, synced, then renamed), or the error
/// naming `--html` and the file: a full disk leaves no page at all. `mur trace --html` and
/// `mur eval show --html` write through it.
pub(crate) fn write_page(out: &std::path::Path, page: &str) -> Result<(), crate::diag::Diagnostic> {
    crate::fsx::write_output(out, page.as_bytes()).map_err(|e| {
        crate::diag::Diagnostic::new(
            crate::diag::code::IO_READ,
            "--html",
            format!("cannot write {}: {e}", out.display()),
        )
    })
}
