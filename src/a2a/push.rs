//! Push-notification configs of both A2A generations: the params of the four config methods
//! (1.0 `CreateTaskPushNotificationConfig` … `DeleteTaskPushNotificationConfig`, 0.3
//! `tasks/pushNotificationConfig/{set,get,list,delete}`) and a send's
//! `configuration.taskPushNotificationConfig` (0.3 and the 1.0 spec's example:
//! `pushNotificationConfig`), read from untrusted JSON with caps; and a config rendered back
//! in each generation. A token or credential that could break a header line is refused here,
//! and neither is ever rendered back (they are the webhook's secrets).

use super::params::MAX_ID;
use super::Generation;
use serde_json::{json, Map, Value};

/// The longest webhook URL accepted, bytes.
pub const MAX_URL: usize = 2048;
/// The longest token or credentials accepted, bytes.
pub const MAX_SECRET: usize = 4096;
/// The longest authentication scheme name accepted, bytes.
pub const MAX_SCHEME: usize = 64;

/// How a webhook call authenticates: `Authorization: <scheme> <credentials>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub scheme: String,
    pub credentials: Option<String>,
}

/// One webhook, as a caller configured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The config's id (absent: the door names it).
    pub id: Option<String>,
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`.
    pub token: Option<String>,
    pub auth: Option<Auth>,
    /// The generation it was made in: the payloads its webhook gets.
    pub generation: Generation,
}

/// A config method's params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Set { task_id: String, config: Config },
    Get { task_id: String, id: Option<String> },
    List { task_id: String },
    Delete { task_id: String, id: Option<String> },
}

impl Op {
    pub fn task_id(&self) -> &str {
        match self {
            Op::Set { task_id, .. }
            | Op::Get { task_id, .. }
            | Op::List { task_id }
            | Op::Delete { task_id, .. } => task_id,
        }
    }
}

fn str_field(o: &Map<String, Value>, key: &str, max: usize) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s.len() <= max => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(format!("{key} exceeds {max} bytes")),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

fn required(o: &Map<String, Value>, key: &str) -> Result<String, String> {
    str_field(o, key, MAX_ID)?.ok_or_else(|| format!("{key} is required"))
}

/// A header value: visible ASCII and spaces only (no line break can be smuggled in).
fn header_safe(key: &str, v: Option<String>) -> Result<Option<String>, String> {
    match v {
        Some(s) if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
            Err(format!("{key} must be printable ASCII"))
        }
        v => Ok(v),
    }
}

/// An HTTP authentication scheme name (an RFC 9110 token).
fn scheme_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SCHEME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn auth(v: Option<&Value>) -> Result<Option<Auth>, String> {
    let o = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err("authentication must be an object".into()),
    };
    // 1.0: one `scheme`; 0.3: a list of `schemes`, of which Bearer is taken when listed.
    let scheme = match (o.get("scheme"), o.get("schemes")) {
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(Value::Array(list))) => {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            if names.len() != list.len() || names.len() > 16 {
                return Err("authentication.schemes must be at most 16 strings".into());
            }
            let pick = names
                .iter()
                .find(|n| n.eq_ignore_ascii_case("bearer"))
                .or(names.first());
            match pick {
                Some(s) => s.to_string(),
                None => return Ok(None),
            }
        }
        (None | Some(Value::Null), None | Some(Value::Null)) => return Ok(None),
        _ => return Err("authentication.scheme must be a string".into()),
    };
    if !scheme_ok(&scheme) {
        return Err("authentication.scheme is not an HTTP authentication scheme".into());
    }
    let credentials = header_safe(
        "authentication.credentials",
        str_field(o, "credentials", MAX_SECRET)?,
    )?;
    Ok(Some(Auth { scheme, credentials }))
}

/// A config's own fields (`url`, `id`, `token`, `authentication`).
pub fn config(o: &Map<String, Value>, generation: Generation) -> Result<Config, String> {
    let url = str_field(o, "url", MAX_URL)?.ok_or("url is required")?;
    Ok(Config {
        id: str_field(o, "id", MAX_ID)?,
        url,
        token: header_safe("token", str_field(o, "token", MAX_SECRET)?)?,
        auth: auth(o.get("authentication"))?,
        generation,
    })
}

/// A send's `configuration` object's push config, if it names one.
pub fn in_send(c: &Map<String, Value>, gen: Generation) -> Result<Option<Config>, String> {
    let v = c
        .get("taskPushNotificationConfig")
        .filter(|v| !v.is_null())
        .or_else(|| c.get("pushNotificationConfig"));
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => config(o, gen).map(Some),
        Some(_) => Err("the push notification config must be an object".into()),
    }
}

/// Which config method a method name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Set,
    Get,
    List,
    Delete,
}

/// A config method's params in `gen`.
pub fn params(kind: Kind, p: &Map<String, Value>, gen: Generation) -> Result<Op, String> {
    match gen {
        Generation::V10 => {
            let task_id = required(p, "taskId")?;
            Ok(match kind {
                Kind::Set => Op::Set {
                    task_id,
                    config: config(p, gen)?,
                },
                Kind::Get => Op::Get {
                    task_id,
                    id: Some(required(p, "id")?),
                },
                Kind::List => Op::List { task_id },
                Kind::Delete => Op::Delete {
                    task_id,
                    id: Some(required(p, "id")?),
                },
            })
        }
        Generation::V03 => Ok(match kind {
            Kind::Set => {
                let task_id = required(p, "taskId")?;
                let Some(Value::Object(c)) = p.get("pushNotificationConfig") else {
                    return Err("pushNotificationConfig must be an object".into());
                };
                Op::Set {
                    task_id,
                    config: config(c, gen)?,
                }
            }
            Kind::Get => Op::Get {
                task_id: required(p, "id")?,
                id: str_field(p, "pushNotificationConfigId", MAX_ID)?,
            },
            Kind::List => Op::List {
                task_id: required(p, "id")?,
            },
            Kind::Delete => Op::Delete {
                task_id: required(p, "id")?,
                id: Some(required(p, "pushNotificationConfigId")?),
            },
        }),
    }
}

/// A stored config (its id given) as `gen` renders it: never its token or credentials.
pub fn render(task_id: &str, id: &str, c: &Config, gen: Generation) -> Value {
    match gen {
        Generation::V10 => {
            let mut v = json!({"taskId": task_id, "id": id, "url": c.url});
            if let Some(a) = &c.auth {
                v["authentication"] = json!({"scheme": a.scheme});
            }
            v
        }
        Generation::V03 => {
            let mut inner = json!({"id": id, "url": c.url});
            if let Some(a) = &c.auth {
                inner["authentication"] = json!({"schemes": [a.scheme]});
            }
            json!({"taskId": task_id, "pushNotificationConfig": inner})
        }
    }
}

/// A list of configs as `gen` answers `list`: 1.0 `{configs}`, 0.3 a bare array.
pub fn render_list(items: Vec<Value>, gen: Generation) -> Value {
    match gen {
        Generation::V10 => json!({ "configs": items }),
        Generation::V03 => Value::Array(items),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn both_generations_read_to_one_config() {
        let v10 = params(
            Kind::Set,
            &obj(
                json!({"taskId": "t", "url": "http://127.0.0.1:9/h", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "sec"}}),
            ),
            Generation::V10,
        )
        .unwrap();
        let v03 = params(
            Kind::Set,
            &obj(
                json!({"taskId": "t", "pushNotificationConfig": {"url": "http://127.0.0.1:9/h",
                "token": "tok", "authentication": {"schemes": ["Basic", "bearer"], "credentials": "sec"}}}),
            ),
            Generation::V03,
        )
        .unwrap();
        let Op::Set { config, .. } = &v03 else { panic!() };
        assert_eq!(config.auth.as_ref().unwrap().scheme, "bearer");
        let Op::Set { config: c10, .. } = &v10 else {
            panic!()
        };
        assert_eq!(
            (c10.url.as_str(), c10.token.as_deref()),
            ("http://127.0.0.1:9/h", Some("tok"))
        );
        let shown = render("t", "p1", c10, Generation::V10).to_string();
        assert!(!shown.contains("sec") && !shown.contains("tok"), "{shown}");
        assert_eq!(
            params(
                Kind::Delete,
                &obj(json!({"id": "t", "pushNotificationConfigId": "p"})),
                Generation::V03
            ),
            Ok(Op::Delete {
                task_id: "t".into(),
                id: Some("p".into())
            })
        );
    }

    #[test]
    fn what_could_break_a_header_or_is_not_a_config_is_refused() {
        for bad in [
            json!({"taskId": "t", "url": "http://h/", "token": "a\r\nx: y"}),
            json!({"taskId": "t", "url": "http://h/", "authentication": {"scheme": "Bearer", "credentials": "a\nb"}}),
            json!({"taskId": "t", "url": "http://h/", "authentication": {"scheme": "Bea rer"}}),
            json!({"taskId": "t", "url": 7}),
            json!({"taskId": "t"}),
            json!({"url": "http://h/"}),
        ] {
            assert!(
                params(Kind::Set, &obj(bad.clone()), Generation::V10).is_err(),
                "{bad}"
            );
        }
        assert!(in_send(&obj(json!({"pushNotificationConfig": "x"})), Generation::V03).is_err());
        assert_eq!(
            in_send(&obj(json!({"blocking": true})), Generation::V03),
            Ok(None)
        );
    }
}
