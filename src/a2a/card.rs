//! The agent card served at `/.well-known/agent-card.json`: the spec's fields (`name`,
//! `version`, `url` as `localhost:<port>`, `capabilities{tools,shell,network,streaming}`)
//! merged with what A2A clients need (a JSON-RPC interface for 1.0 and one for 0.3,
//! input/output modes, one skill), every field the SDK's model marks REQUIRED non-empty.

use serde_json::{json, Value};

/// What the card says about a capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct CardInfo<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// The manifest's description; empty or absent gets a generated one.
    pub description: Option<&'a str>,
    pub port: u16,
    /// Model-visible tool (artifact) names.
    pub tools: &'a [String],
    pub shell: bool,
    pub network: bool,
    pub streaming: bool,
}

fn non_empty<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if s.trim().is_empty() {
        fallback
    } else {
        s
    }
}

/// The card's JSON.
pub fn agent_card(c: &CardInfo) -> Value {
    let name = non_empty(c.name, "capsule");
    let version = non_empty(c.version, "0.0.0");
    let generated = format!("Murmur capsule {name} {version}");
    let description = match c.description {
        Some(d) if !d.trim().is_empty() => d.to_string(),
        _ => generated,
    };
    let url = format!("http://127.0.0.1:{}/", c.port);
    json!({
        "name": name,
        "version": version,
        "description": description,
        "url": format!("localhost:{}", c.port),
        "capabilities": {
            "tools": c.tools,
            "shell": c.shell,
            "network": c.network,
            "streaming": c.streaming,
            "pushNotifications": false,
        },
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "task",
            "name": "Task",
            "description": format!("Runs a task given as text on {name} and answers with an artifact named response."),
            "tags": ["task", "murmur"],
        }],
    })
}

/// The card as body bytes.
pub fn agent_card_body(c: &CardInfo) -> Vec<u8> {
    serde_json::to_vec(&agent_card(c)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(tools: &[String]) -> CardInfo<'_> {
        CardInfo {
            name: "echo",
            version: "1.2.3",
            description: Some("Echoes."),
            port: 4242,
            tools,
            shell: true,
            network: false,
            streaming: true,
        }
    }

    #[test]
    fn card_has_the_spec_and_sdk_fields() {
        let tools = vec!["grep".to_string()];
        let v = agent_card(&info(&tools));
        let url = "http://127.0.0.1:4242/";
        assert_eq!(
            v,
            json!({
                "name": "echo",
                "version": "1.2.3",
                "description": "Echoes.",
                "url": "localhost:4242",
                "capabilities": {"tools": ["grep"], "shell": true, "network": false,
                    "streaming": true, "pushNotifications": false},
                "supportedInterfaces": [
                    {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                ],
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "task", "name": "Task",
                    "description": "Runs a task given as text on echo and answers with an artifact named response.",
                    "tags": ["task", "murmur"]}],
            })
        );
    }

    fn assert_required(v: &Value) {
        let filled = |x: &Value| match x {
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(_) => true,
            _ => false,
        };
        for k in [
            "name",
            "description",
            "supportedInterfaces",
            "version",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        ] {
            assert!(filled(&v[k]), "{k} missing or empty");
        }
        for i in v["supportedInterfaces"].as_array().unwrap() {
            for k in ["url", "protocolBinding", "protocolVersion"] {
                assert!(filled(&i[k]), "interface {k}");
            }
            assert!(i["url"].as_str().unwrap().starts_with("http://"));
        }
        for s in v["skills"].as_array().unwrap() {
            for k in ["id", "name", "description", "tags"] {
                assert!(filled(&s[k]), "skill {k}");
            }
        }
    }

    #[test]
    fn required_fields_are_never_empty() {
        assert_required(&agent_card(&info(&[])));
        let bare = CardInfo {
            name: "",
            version: " ",
            description: Some("  "),
            port: 0,
            tools: &[],
            shell: false,
            network: false,
            streaming: false,
        };
        let v = agent_card(&bare);
        assert_required(&v);
        assert_eq!(v["description"], "Murmur capsule capsule 0.0.0");
        assert_eq!(v["capabilities"]["tools"], json!([]));
        let none = CardInfo {
            description: None,
            ..info(&[])
        };
        assert_eq!(agent_card(&none)["description"], "Murmur capsule echo 1.2.3");
    }

    #[test]
    fn body_round_trips() {
        let b = agent_card_body(&info(&[]));
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v, agent_card(&info(&[])));
    }
}
