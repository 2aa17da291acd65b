//! `mur install`: fetch every artifact a manifest declares that the local registry lacks,
//! from the OCI registries the operator's `registry.sources` name (the project's
//! `.murmur/config.yaml` beside the manifest first, then `~/.config/murmur/config.yaml`),
//! and pin what was fetched in the capsule's lock. An artifact the lock pins is fetched by
//! the pinned digest, so a tag moved in the registry changes nothing; `--locked` fetches
//! only what the lock pins and never writes it.

use super::oci::{pulled_line, session};
use crate::diag::{code, Diagnostic};
use crate::manifest::lock::Pin;
use crate::manifest::Resolve;
use crate::places;
use crate::registry::lockfile::{self, Existing};
use crate::registry::oci::{self, reference, Reference, Target};
use crate::registry::store;
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct InstallOptions {
    pub manifest: Option<PathBuf>,
    pub registry: Option<PathBuf>,
    /// Fetch only what the lock pins; never write the lock.
    pub locked: bool,
    pub json: bool,
}

/// One `registry.sources` entry: artifacts whose full name starts with `prefix` come from
/// `<repository>/<full name>`, tagged with their version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub prefix: String,
    pub repository: Reference,
}

/// Largest config file read.
const MAX_CONFIG: u64 = 64 * 1024;

/// The `registry.sources` of a config file's text (absent: none). Every entry needs a
/// `prefix` (a scope such as `local/`, a name prefix, or "" for all) and an `oci://` or
/// `oci+http://` repository without a tag.
pub fn parse_sources(text: &str) -> Result<Vec<Source>, String> {
    let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let Some(list) = v.get("registry").and_then(|r| r.get("sources")) else {
        return Ok(Vec::new());
    };
    let list = list.as_sequence().ok_or("registry.sources is not a list")?;
    list.iter()
        .enumerate()
        .map(|(i, e)| {
            let field = |k: &str| {
                e.get(k)
                    .and_then(|x| x.as_str())
                    .ok_or_else(|| format!("registry.sources[{i}].{k} is missing or not a string"))
            };
            let repository = Reference::parse(field("repository")?)
                .map_err(|why| format!("registry.sources[{i}].repository: {why}"))?;
            if repository.target.is_some() {
                return Err(format!(
                    "registry.sources[{i}].repository names a tag or digest; name the repository only"
                ));
            }
            Ok(Source {
                prefix: field("prefix")?.to_string(),
                repository,
            })
        })
        .collect()
}

/// Step: the sources, the project's first.
fn sources(base: &Path) -> Result<Vec<Source>, Diagnostic> {
    let mut all = Vec::new();
    for path in [
        Some(base.join(places::PROJECT_CONFIG)),
        places::user_config_file(),
    ]
    .into_iter()
    .flatten()
    {
        let bytes = match store::read_small(&path, MAX_CONFIG) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(config_error(&path, e.to_string())),
        };
        let text = String::from_utf8(bytes).map_err(|_| config_error(&path, "not UTF-8".into()))?;
        all.extend(parse_sources(&text).map_err(|why| config_error(&path, why))?);
    }
    Ok(all)
}

fn config_error(path: &Path, why: String) -> Diagnostic {
    Diagnostic::new(
        code::MAN_INVALID,
        path.display().to_string(),
        format!("{}: {why}", path.display()),
    )
}

/// Step: where `full` comes from: the first source with the longest matching prefix.
fn source_of(sources: &[Source], full: &str) -> Result<Reference, Diagnostic> {
    // `max_by_key` keeps the last of equals: reversed, the first listed wins a tie.
    let best = sources
        .iter()
        .rev()
        .filter(|s| full.starts_with(&s.prefix))
        .max_by_key(|s| s.prefix.len());
    let s = best.ok_or_else(|| {
        Diagnostic::new(
            code::REG_REMOTE,
            format!("artifacts[{full}]"),
            format!("{full} is not in the local registry and no registry.sources entry matches it"),
        )
        .with_hint("add one to .murmur/config.yaml or ~/.config/murmur/config.yaml (prefix, repository: oci://HOST/REPO)")
    })?;
    let repository = format!("{}/{full}", s.repository.repository);
    if !reference::repository_ok(&repository) {
        return Err(Diagnostic::new(
            code::REG_REMOTE,
            format!("artifacts[{full}]"),
            format!("{repository} is not a repository name an OCI registry takes"),
        ));
    }
    Ok(Reference {
        repository,
        ..s.repository.clone()
    })
}

/// Fetch what is missing; pin it.
pub fn install(o: &InstallOptions) -> Result<String, Diagnostic> {
    let root = o.registry.clone().unwrap_or_else(store::default_root);
    let super::lock::LockPlace {
        path,
        base,
        file,
        dir,
        old,
    } = super::lock::LockPlace::of(o.manifest.clone())?;
    if o.locked && old.is_none() {
        return Err(Diagnostic::new(
            code::RUN_LOCK,
            &file,
            format!("--locked: there is no {file} to install from"),
        ));
    }
    let declared = super::lock::declared(&path, old.as_ref())?;
    let sources = sources(&base)?;
    let mut out = String::new();
    let mut lock = old.clone().unwrap_or_default();
    for (full, version) in &declared.pins {
        let pin = old.as_ref().and_then(|l| l.get(full)).cloned();
        let pulled = fetch_one(&root, &sources, full, version, pin.as_ref(), o.locked, &file)?;
        if let Some((p, from)) = &pulled {
            out.push_str(&pulled_line(p, from, o.json));
        }
        if pin.is_none() {
            let r = store::resolve(&root, full, version, Resolve::Nothing)?;
            lock.set(Pin {
                name: full.clone(),
                version: version.clone(),
                sha256: r.sha256,
            });
        }
    }
    if !o.locked && old.as_ref() != Some(&lock) {
        // The fetches took a while: a lock written meanwhile (`mur lock`, a first `mur run`)
        // keeps its pins, and only what it lacks is added.
        let now = lockfile::read(&dir, &file)?;
        if now != old {
            let mut merged = now.unwrap_or_default();
            for p in lock.pins() {
                if merged.get(&p.name).is_none() {
                    merged.set(p.clone());
                }
            }
            lock = merged;
        }
        lockfile::write(&dir, &file, &lock, Existing::Replace)
            .map_err(|e| Diagnostic::new(code::IO_READ, &file, format!("cannot write {file}: {e}")))?;
        out.push_str(&if o.json {
            format!("{}\n", serde_json::json!({"lock": base.join(&file).display().to_string(), "total": lock.pins().len()}))
        } else {
            format!("wrote {} ({} artifacts pinned)\n", base.join(&file).display(), lock.pins().len())
        });
    }
    if out.is_empty() && !o.json {
        out.push_str("every artifact is installed\n");
    }
    Ok(out)
}

/// Step: one artifact: nothing when the local registry has it; else fetched by the lock's
/// pin (its version must be the manifest's), or by its version's tag when unpinned.
fn fetch_one(
    root: &Path,
    sources: &[Source],
    full: &str,
    version: &str,
    pin: Option<&Pin>,
    locked: bool,
    file: &str,
) -> Result<Option<(oci::Pulled, String)>, Diagnostic> {
    let name = store::ArtifactName::parse(full)?;
    let key = format!("artifacts[{full}]");
    if let Some(p) = pin.filter(|p| p.version != version) {
        return Err(Diagnostic::new(
            code::RUN_LOCK,
            key,
            format!(
                "{file} pins {full}@{}, the manifest asks for {version}",
                p.version
            ),
        )
        .with_hint(format!(
            "run `mur lock --update {full}` once {full}@{version} is installed"
        )));
    }
    if locked && pin.is_none() {
        return Err(Diagnostic::new(
            code::RUN_LOCK,
            key,
            format!("--locked: {file} does not pin {full}"),
        ));
    }
    if store::locate(root, &name, version).dir.exists() {
        // Installed already: it must be the pinned bytes, as `mur run` will require.
        if let Some(p) = pin {
            let have = store::resolve(root, full, version, Resolve::Nothing)?;
            if have.sha256 != p.sha256 {
                return Err(Diagnostic::new(
                    code::REG_INTEGRITY,
                    key,
                    format!(
                        "{full}@{version} in the local registry has sha256 {}, {file} pins sha256 {}",
                        have.sha256, p.sha256
                    ),
                ));
            }
        }
        return Ok(None);
    }
    let r = source_of(sources, full)?;
    let mut s = session(&r, false)?;
    Ok(Some(match pin {
        Some(p) => (
            oci::pull_pinned(&mut s, root, full, version, &p.sha256)?,
            r.at(Target::Digest(format!("sha256:{}", p.sha256))).to_text(),
        ),
        None => (
            oci::pull(
                &mut s,
                root,
                &Target::Tag(version.to_string()),
                Some((full, version)),
            )?,
            r.at(Target::Tag(version.to_string())).to_text(),
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_equal_prefixes_the_first_listed_wins() {
        let s = parse_sources(
            "registry:\n  sources:\n    - {prefix: a, repository: 'oci://one.example/x'}\n    - {prefix: a, repository: 'oci://two.example/x'}\n",
        )
        .unwrap();
        assert_eq!(source_of(&s, "ab").unwrap().host, "one.example");
    }

    #[test]
    fn sources_parse_and_the_longest_prefix_wins() {
        let s = parse_sources(
            "registry:\n  sources:\n    - prefix: \"\"\n      repository: oci://r.example/all\n    - prefix: local/\n      repository: oci+http://127.0.0.1:5000/murmur\n",
        )
        .unwrap();
        assert_eq!(
            source_of(&s, "local/hello").unwrap().to_text(),
            "oci+http://127.0.0.1:5000/murmur/local/hello"
        );
        assert_eq!(
            source_of(&s, "other").unwrap().to_text(),
            "oci://r.example/all/other"
        );
        assert!(source_of(&s[1..], "other").is_err());
        assert_eq!(parse_sources("x: 1\n").unwrap(), vec![]);
        for bad in [
            "registry: {sources: 3}",
            "registry: {sources: [{prefix: a}]}",
            "registry: {sources: [{prefix: a, repository: 'oci://h/r:tag'}]}",
            "registry: {sources: [{prefix: a, repository: 'oci+http://10.1.1.1/r'}]}",
            "registry: {sources: [{repository: 'oci://h/r'}]}",
        ] {
            assert!(parse_sources(bad).is_err(), "{bad}");
        }
    }
}
