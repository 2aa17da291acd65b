//! The resource plane's file access, shared by the operator plane (`exports.files`) and the
//! peer plane (`exports.peer_files`): one path check ([`path`]), one resolver beneath an
//! export root from a held directory descriptor ([`open`]), one listing ([`list`]). Every
//! refusal is a [`Refusal`] carrying the spec's status and error code.

pub mod body;
pub mod hashing;
pub mod list;
pub mod open;
pub mod path;
pub mod peer;
pub mod walk;

use crate::containment::class::Class;

/// Why a request was refused: the spec's error table (both planes share these rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 404: the path names nothing under the root, or the root does not exist.
    NotFound,
    /// 403: the path, or a symlink's target, resolves outside the export root.
    OutsideRoot,
    /// 403: a symlink met under `scoped` containment.
    SymlinkRefused,
    /// 403: a directory, fifo, socket or device node.
    NotARegularFile,
    /// 413: larger than the export's `max_bytes`.
    TooLarge,
    /// 500: the open or read failed otherwise (the text is for the message).
    Io(String),
    /// 503: every slot for a large body is taken (not a row of the spec's table: the
    /// door's own bound on concurrent reads); retry shortly.
    Busy,
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::NotFound => 404,
            Refusal::OutsideRoot | Refusal::SymlinkRefused | Refusal::NotARegularFile => 403,
            Refusal::TooLarge => 413,
            Refusal::Io(_) => 500,
            Refusal::Busy => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotFound => "not_found",
            Refusal::OutsideRoot => "outside_root",
            Refusal::SymlinkRefused => "symlink_refused",
            Refusal::NotARegularFile => "not_a_regular_file",
            Refusal::TooLarge => "too_large",
            Refusal::Io(_) => "io_error",
            Refusal::Busy => "busy",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::NotFound => "the path names nothing under the export root".into(),
            Refusal::OutsideRoot => "the path resolves outside the export root".into(),
            Refusal::SymlinkRefused => {
                "a symbolic link is on the path, and this session's containment (scoped) refuses them".into()
            }
            Refusal::NotARegularFile => "the path names something other than a regular file".into(),
            Refusal::TooLarge => "the file is larger than the export's max_bytes".into(),
            Refusal::Io(e) => format!("the file could not be read: {e}"),
            Refusal::Busy => "every slot for a large read is taken; retry shortly".into(),
        }
    }
}

/// How symlinks under an export root are treated: refused under `scoped`, followed (but
/// only to targets beneath the root) under `advisory` and `sealed`. `Fail` refuses them as
/// `Refuse` does, and a listing that meets one is an error naming it (a tree to be copied
/// whole, such as an evaluation case's `start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    Refuse,
    FollowBeneath,
    Fail,
}

impl Symlinks {
    /// Whether a path resolution may not pass any symlink.
    pub fn refused(self) -> bool {
        self != Symlinks::FollowBeneath
    }

    pub fn for_class(class: Class) -> Symlinks {
        match class {
            Class::Scoped => Symlinks::Refuse,
            Class::Advisory | Class::Sealed => Symlinks::FollowBeneath,
        }
    }
}

/// E-CAP-007: an export root that exists as a symlink resolving outside the accessible
/// workdir `work` refuses the launch. The check is the reader's own confined resolution
/// (symlinks followed only beneath `work`), not a comparison of host path strings; a root
/// that does not exist yet is fine.
pub fn check_export_roots(
    m: &crate::manifest::model::Manifest,
    work: &crate::fsx::Dir,
) -> Result<(), crate::diag::Diagnostic> {
    use crate::diag::{code, Diagnostic};
    let roots = [
        m.exports
            .files
            .as_ref()
            .map(|f| ("exports.files.root", &f.root_written, &f.root)),
        m.exports
            .peer_files
            .as_ref()
            .map(|f| ("exports.peer_files.root", &f.root_written, &f.root)),
    ];
    for (key, written, root) in roots.into_iter().flatten() {
        match open::open_root(work, root, Symlinks::FollowBeneath) {
            Ok(_) => {}
            Err(Refusal::OutsideRoot) => {
                return Err(Diagnostic::new(
                    code::CAP_EXPORT_ROOT_ESCAPES,
                    key,
                    format!("murmur.yaml: {key} '{written}' resolves outside the accessible workdir"),
                )
                .with_hint(
                    "an export root must be a directory inside the workdir, not a symlink leaving it",
                ))
            }
            // Anything else (a loop, a file where a directory should be) is the reader's
            // to refuse per request.
            Err(_) => {}
        }
    }
    Ok(())
}
