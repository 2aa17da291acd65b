//! The spawn envelope: the ten axes of the roost spec's table, lowered from a manifest, and
//! the one check that a child's envelope lies within its parent's.

use super::model::{Containment, Manifest};
use super::netrule::{any_covers, NetRule};
use std::collections::BTreeSet;

/// What a capsule holds, axis by axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub network_allow: Vec<NetRule>,
    pub unix_sockets: bool,
    pub peer_fetch_allow: Vec<NetRule>,
    pub shell_allow: Vec<String>,
    pub spawn_allow: Vec<String>,
    pub env_allow: Vec<String>,
    /// None: the whole workdir.
    pub filesystem_scope: Option<String>,
    pub workdir_exec: bool,
    /// Every state store the capsule's own grants or its artifacts' open.
    pub state_stores: BTreeSet<String>,
    pub containment: Containment,
}

impl Envelope {
    /// Lower a manifest. A `state` block without `store` opens a store named after the
    /// capsule.
    pub fn of(m: &Manifest) -> Envelope {
        let c = &m.capabilities;
        let mut state_stores = BTreeSet::new();
        let per_artifact = m.artifacts.iter().filter_map(|a| a.capabilities.as_ref());
        for state in std::iter::once(c)
            .chain(per_artifact)
            .filter_map(|c| c.state.as_ref())
        {
            state_stores.insert(state.clone().unwrap_or_else(|| m.name.clone()));
        }
        Envelope {
            network_allow: c.network_allow.clone(),
            unix_sockets: c.unix_sockets,
            peer_fetch_allow: c.peer_fetch_allow.clone().unwrap_or_default(),
            shell_allow: c.shell_allow.clone().unwrap_or_default(),
            spawn_allow: c.spawn_allow.clone(),
            env_allow: c.env_allow.clone(),
            filesystem_scope: c.filesystem_scope.clone(),
            workdir_exec: c.workdir_exec,
            state_stores,
            containment: c.containment,
        }
    }
}

fn exceeds(key: &str, entry: &str) -> String {
    format!(
        "{key}: the child declares '{entry}', which its parent does not hold — a spawned capsule can never hold more capability than the capsule that spawned it"
    )
}

fn names_within(key: &str, parent: &[String], child: &[String]) -> Result<(), String> {
    match child.iter().find(|c| !parent.contains(c)) {
        Some(c) => Err(exceeds(key, c)),
        None => Ok(()),
    }
}

fn rules_within(key: &str, parent: &[NetRule], child: &[NetRule]) -> Result<(), String> {
    match child.iter().find(|c| !any_covers(parent, c)) {
        Some(c) => Err(exceeds(key, &c.to_string())),
        None => Ok(()),
    }
}

fn flag_within(key: &str, parent: bool, child: bool) -> Result<(), String> {
    if child && !parent {
        Err(exceeds(key, "true"))
    } else {
        Ok(())
    }
}

/// Whether `child` holds no more than `parent` on every axis, checked in the table's order.
/// The refusal names the manifest key and the child's entry that exceeded.
pub fn contains(parent: &Envelope, child: &Envelope) -> Result<(), String> {
    rules_within(
        "capabilities.network.allow",
        &parent.network_allow,
        &child.network_allow,
    )?;
    flag_within(
        "capabilities.network.unix_sockets",
        parent.unix_sockets,
        child.unix_sockets,
    )?;
    rules_within(
        "capabilities.peer_fetch.allow",
        &parent.peer_fetch_allow,
        &child.peer_fetch_allow,
    )?;
    names_within(
        "capabilities.shell.allow",
        &parent.shell_allow,
        &child.shell_allow,
    )?;
    names_within(
        "capabilities.spawn.allow",
        &parent.spawn_allow,
        &child.spawn_allow,
    )?;
    names_within("capabilities.env.allow", &parent.env_allow, &child.env_allow)?;
    if let Some(scope) = &parent.filesystem_scope {
        match &child.filesystem_scope {
            None => return Err(exceeds("capabilities.filesystem.scope", "the whole workdir")),
            Some(c) if c != scope && !c.starts_with(&format!("{scope}/")) => {
                return Err(exceeds("capabilities.filesystem.scope", c))
            }
            Some(_) => {}
        }
    }
    flag_within(
        "capabilities.filesystem.workdir_exec",
        parent.workdir_exec,
        child.workdir_exec,
    )?;
    let stores: Vec<String> = child.state_stores.iter().cloned().collect();
    let parent_stores: Vec<String> = parent.state_stores.iter().cloned().collect();
    names_within("capabilities.state.store", &parent_stores, &stores)?;
    if child.containment < parent.containment {
        return Err(format!(
            "capabilities.containment: the child declares '{}', below its parent's floor '{}' — a containment floor may only rise from parent to child",
            child.containment, parent.containment
        ));
    }
    Ok(())
}
