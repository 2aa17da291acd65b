//! `mur version`: the version line `mur --version` prints, then the build's facts an
//! operator puts in a bug report (commit, target, compiler, features, the guest interfaces
//! and A2A generations it speaks); `--json` as one object.

use serde_json::json;

/// What this binary was built from and speaks.
pub struct Facts {
    pub version: &'static str,
    /// The git commit HEAD named at build time (`unknown` outside a checkout).
    pub commit: &'static str,
    pub target: &'static str,
    pub rustc: &'static str,
    pub features: Vec<&'static str>,
    /// Every WIT package of `wit/` (`murmur:capsule@0.1.0`, …).
    pub wit: Vec<&'static str>,
    pub a2a: &'static [&'static str],
}

/// The WIT files the runtime's guests are built against, read at compile time.
const WIT: [&str; 5] = [
    include_str!("../../wit/capsule.wit"),
    include_str!("../../wit/deps/tool/tool.wit"),
    include_str!("../../wit/deps/tool-registry/invoke.wit"),
    include_str!("../../wit/hook/hook.wit"),
    include_str!("../../wit/hook-0.1/hook.wit"),
];

/// Step: the `package NAME@VERSION;` of each WIT file.
fn wit_packages() -> Vec<&'static str> {
    WIT.iter()
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("package "))
                .map(|p| p.trim_end_matches(';').trim())
        })
        .collect()
}

/// Step: the cargo features this binary was built with.
fn features() -> Vec<&'static str> {
    let mut on = Vec::new();
    if cfg!(feature = "runtime") {
        on.push("runtime");
    }
    if cfg!(feature = "tls") {
        on.push("tls");
    }
    on
}

/// This build's facts.
pub fn facts() -> Facts {
    Facts {
        version: crate::VERSION,
        commit: env!("MURMUR_BUILD_COMMIT"),
        target: env!("MURMUR_BUILD_TARGET"),
        rustc: env!("MURMUR_BUILD_RUSTC"),
        features: features(),
        wit: wit_packages(),
        a2a: crate::a2a::GENERATIONS,
    }
}

/// `mur version [--json]`: the `--version` line, then a line per fact; or one JSON object.
pub fn render(f: &Facts, bin: &str, json: bool) -> String {
    if json {
        return format!(
            "{}\n",
            json!({"name": bin, "version": f.version, "commit": f.commit, "target": f.target,
                   "rustc": f.rustc, "features": f.features, "wit": f.wit, "a2a": f.a2a})
        );
    }
    let none = |v: &[&str]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(" ")
        }
    };
    format!(
        "{bin} {}\ncommit:   {}\ntarget:   {}\nrustc:    {}\nfeatures: {}\nwit:      {}\na2a:      {}\n",
        f.version,
        f.commit,
        f.target,
        f.rustc,
        none(&f.features),
        f.wit.join(" "),
        f.a2a.join(" "),
    )
}
