//! `mur push` and `mur pull`: a published artifact filed in an OCI registry, and one
//! fetched from it into the local registry; and the setup both share with `mur install`
//! (the CA bundle, the operator's credentials for the host, the progress stream).

use crate::diag::{code, Diagnostic};
use crate::http::tls::{self, CaError, TlsConfig};
use crate::places;
use crate::registry::oci::{self, auth, Reference, Session, Target};
use crate::registry::store;
use std::path::PathBuf;

#[derive(Debug, Default)]
pub struct PushOptions {
    /// `NAME@VERSION` from the local registry.
    pub artifact: String,
    /// `oci://HOST/REPO[:TAG]` (the tag defaults to the version).
    pub to: String,
    pub registry: Option<PathBuf>,
    pub json: bool,
}

#[derive(Debug, Default)]
pub struct PullOptions {
    /// `oci://HOST/REPO:TAG` or `…@sha256:…`.
    pub from: String,
    pub registry: Option<PathBuf>,
    pub json: bool,
}

/// Step: the roots HTTPS is checked against: `MURMUR_CA_FILE`, else the system's bundle.
/// Only asked for when the reference is HTTPS.
fn tls_config(r: &Reference) -> Result<Option<TlsConfig>, Diagnostic> {
    if !r.base.starts_with("https://") {
        return Ok(None);
    }
    let refused = |m: String| Diagnostic::new(code::REG_REMOTE, r.to_text(), m);
    match tls::operator_config(|p| store::read_small(p, tls::MAX_CA_FILE)) {
        Ok(config) => Ok(Some(config)),
        Err(CaError::Bundle(m)) => Err(refused(m)),
        Err(CaError::Named(m)) => Err(refused(format!("MURMUR_CA_FILE {m}"))),
        Err(CaError::Missing) => Err(refused(
            "no CA bundle found to check the registry's certificate".into(),
        )
        .with_hint("set MURMUR_CA_FILE to a PEM bundle")),
    }
}

/// Step: the operator's credentials for the reference's host, if the auth file has some.
/// A file that exists but cannot be read or parsed is an error, not a silent anonymous try.
fn credentials(r: &Reference) -> Result<Option<auth::Credentials>, Diagnostic> {
    let Some(path) = places::registry_auth_file() else {
        return Ok(None);
    };
    let bytes = match store::read_small(&path, auth::MAX_AUTH_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                path.display().to_string(),
                format!("cannot read the registry credentials: {e}"),
            ))
        }
    };
    auth::credentials(&bytes, &r.host).map_err(|why| {
        Diagnostic::new(
            code::IO_READ,
            path.display().to_string(),
            format!("the registry credentials file: {why}"),
        )
    })
}

/// A session with `r`'s repository, set up from the environment.
pub fn session(r: &Reference, push: bool) -> Result<Session, Diagnostic> {
    let tls = tls_config(r)?;
    let creds = credentials(r)?;
    Session::new(r, push, creds, tls, Some(Box::new(std::io::stderr())))
}

fn reference(text: &str) -> Result<Reference, Diagnostic> {
    Reference::parse(text).map_err(|why| Diagnostic::new(code::MAN_INVALID, text, why))
}

/// `mur push NAME@VERSION oci://HOST/REPO[:TAG]`.
pub fn push(o: &PushOptions) -> Result<String, Diagnostic> {
    let (full, version) = o.artifact.rsplit_once('@').ok_or_else(|| {
        Diagnostic::new(
            code::MAN_INVALID,
            &o.artifact,
            "name the artifact as NAME@VERSION",
        )
    })?;
    let r = reference(&o.to)?;
    let tag = match &r.target {
        None => version.to_string(),
        Some(Target::Tag(t)) => t.clone(),
        Some(Target::Digest(_)) => {
            return Err(Diagnostic::new(
                code::MAN_INVALID,
                &o.to,
                "push to a tag (or to the repository, tagged with the version), not to a digest",
            ))
        }
    };
    let root = o.registry.clone().unwrap_or_else(store::default_root);
    let mut s = session(&r, true)?;
    let p = oci::push(&mut s, &root, full, version, &tag)?;
    let at = r.at(Target::Tag(p.tag.clone())).to_text();
    Ok(if o.json {
        format!(
            "{}\n",
            serde_json::json!({"pushed": format!("{full}@{version}"), "to": at, "digest": p.digest, "sha256": p.sha256})
        )
    } else {
        format!(
            "pushed {full}@{version} to {at}\n  manifest {}\n  sha256   {}\n",
            p.digest, p.sha256
        )
    })
}

/// `mur pull oci://HOST/REPO:TAG|@sha256:…`.
pub fn pull(o: &PullOptions) -> Result<String, Diagnostic> {
    let r = reference(&o.from)?;
    let target = r.target.clone().ok_or_else(|| {
        Diagnostic::new(
            code::MAN_INVALID,
            &o.from,
            "name a tag (:TAG) or a digest (@sha256:…) to pull",
        )
    })?;
    let root = o.registry.clone().unwrap_or_else(store::default_root);
    let mut s = session(&r, false)?;
    let p = oci::pull(&mut s, &root, &target, None)?;
    Ok(pulled_line(&p, &r.to_text(), o.json))
}

/// What one fetch did, as a line or a JSON object.
pub fn pulled_line(p: &oci::Pulled, from: &str, json: bool) -> String {
    if json {
        return format!(
            "{}\n",
            serde_json::json!({"artifact": p.full, "version": p.version, "sha256": p.sha256,
                               "from": from, "already_installed": p.already,
                               "path": p.location.archive.display().to_string()})
        );
    }
    let what = if p.already {
        "already installed"
    } else {
        "installed"
    };
    format!(
        "{what} {}@{} from {from}\n  sha256 {}\n",
        p.full, p.version, p.sha256
    )
}
