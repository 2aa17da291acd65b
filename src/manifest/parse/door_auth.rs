//! `capabilities.network.authentication`: the door's opt-in bearer authentication.
//! `scheme` is `bearer` (the only one); `credentials` lists at least one `{name, scopes}`,
//! names unique, each scope a method of the door (its A2A 1.0 name), the operator plane
//! (`resources.files`) or `*` (all of them). Any other shape is E-MAN-003 naming the key.

use super::super::model::{DoorAuth, DoorCredential, DOOR_SCOPES, SPAWNER_CREDENTIAL};
use super::super::read::{invalid, join, Node};
use super::R;
use serde_yaml::Value;

/// The longest credential name.
const MAX_NAME: usize = 64;
/// The most credentials one door declares.
const MAX_CREDENTIALS: usize = 64;

/// The block under the `network` block `node`, if declared.
pub fn parse(node: &Node<'_>) -> R<Option<DoorAuth>> {
    let key = join(node.path, "authentication");
    let Some(block) = node.mapping("authentication")? else {
        return Ok(None);
    };
    let n = Node {
        value: block,
        path: &key,
    };
    match n.string("scheme")?.as_deref() {
        Some("bearer") => {}
        Some(other) => {
            return Err(invalid(
                &join(&key, "scheme"),
                format!("unknown value '{}' (expected bearer)", other.escape_debug()),
            ))
        }
        None => return Err(invalid(&join(&key, "scheme"), "missing required field 'scheme'")),
    }
    let creds_key = join(&key, "credentials");
    let items = match n.raw("credentials") {
        Some(Value::Sequence(items)) if !items.is_empty() => items,
        Some(Value::Sequence(_)) => return Err(invalid(&creds_key, "must list at least one credential")),
        Some(_) => return Err(invalid(&creds_key, "expected a list of {name, scopes} entries")),
        None => return Err(invalid(&creds_key, "missing required field 'credentials'")),
    };
    if items.len() > MAX_CREDENTIALS {
        return Err(invalid(
            &creds_key,
            format!("lists {} credentials; at most {MAX_CREDENTIALS}", items.len()),
        ));
    }
    let mut credentials: Vec<DoorCredential> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{creds_key}[{i}]");
        let c = credential(item, &at)?;
        if credentials.iter().any(|d| d.name == c.name) {
            return Err(invalid(
                &join(&at, "name"),
                format!("'{}' is declared twice", c.name),
            ));
        }
        credentials.push(c);
    }
    Ok(Some(DoorAuth { credentials }))
}

fn credential(item: &Value, at: &str) -> R<DoorCredential> {
    if !matches!(item, Value::Mapping(_)) {
        return Err(invalid(at, "expected a mapping with 'name' and 'scopes'"));
    }
    let entry = Node {
        value: item,
        path: at,
    };
    let name = entry
        .string("name")?
        .ok_or_else(|| invalid(&join(at, "name"), "missing required field 'name'"))?;
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(invalid(
            &join(at, "name"),
            format!(
                "'{}' is not a credential name (1-{MAX_NAME} of a-z, 0-9, '-' and '_')",
                name.escape_debug()
            ),
        ));
    }
    if name == SPAWNER_CREDENTIAL {
        return Err(invalid(
            &join(at, "name"),
            format!("'{SPAWNER_CREDENTIAL}' is reserved for the delegating parent's credential"),
        ));
    }
    let scopes_key = join(at, "scopes");
    let scopes = entry
        .strings("scopes")?
        .ok_or_else(|| invalid(&scopes_key, "missing required field 'scopes'"))?;
    if scopes.is_empty() {
        return Err(invalid(&scopes_key, "must list at least one scope"));
    }
    for (j, s) in scopes.iter().enumerate() {
        if s != "*" && !DOOR_SCOPES.contains(&s.as_str()) {
            return Err(invalid(
                &format!("{scopes_key}[{j}]"),
                format!(
                    "'{}' is not a scope (expected '*' or one of {})",
                    s.escape_debug(),
                    DOOR_SCOPES.join(", ")
                ),
            ));
        }
    }
    Ok(DoorCredential { name, scopes })
}
