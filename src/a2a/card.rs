//! The agent card served at `/.well-known/agent-card.json`, in two forms:
//!
//! - [`agent_card_v10`], for a GET that names A2A 1.0 (`A2A-Version: 1.0`): exactly the
//!   fields of the 1.0 `AgentCard` schema (which admits no others), the capsule's own
//!   (`tools`, `shell`, `network`) carried by a capabilities extension.
//! - [`agent_card`], for every other GET (no header is 0.3: A2A 1.0 §3.6): the 1.0 fields, the
//!   spec's (`url` as `http://localhost:<port>/`, whose `host:port` is the spec's
//!   `localhost:<port>` and the peer plane's audience, and `capabilities{tools,shell,network,
//!   streaming}`), and the 0.3 discovery fields (`protocolVersion`, `preferredTransport`,
//!   `additionalInterfaces`), so a 0.3 client finds the JSON-RPC endpoint from the card alone
//!   and a 1.0 client still finds `supportedInterfaces`.
//!
//! An authenticated door's cards also name its bearer scheme in each generation's form
//! (1.0: `securitySchemes.bearer.httpAuthSecurityScheme` and `securityRequirements`; 0.3:
//! `securitySchemes.bearer` of `type: http` and `security`) and offer the extended card;
//! what it serves without a token is [`public_card`], which leaves out what the manifest
//! grants the capsule.
//!
//! Every field the SDK's model marks REQUIRED is non-empty in both.

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
    /// The door takes bearer tokens (`capabilities.network.authentication`).
    pub auth: bool,
    /// `defaultInputModes`: the media types of the parts the capsule's tasks take.
    pub input_modes: Vec<String>,
    /// `defaultOutputModes`: what its answers hold.
    pub output_modes: Vec<String>,
    /// The manifest allows push-notification webhooks (`a2a.push.allow`).
    pub push: bool,
}

/// The scheme's name in the cards' `securitySchemes`.
pub const BEARER_SCHEME: &str = "bearer";
const BEARER_DESCRIPTION: &str =
    "A murmur door token (mdt1), printed for each declared credential by `mur token --session <id>`.";
const BEARER_FORMAT: &str = "murmur door token (mdt1)";

fn non_empty<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if s.trim().is_empty() {
        fallback
    } else {
        s
    }
}

/// The URI of the extension that carries the capsule's own capabilities in a 1.0 card.
pub const CAPSULE_EXTENSION: &str = "urn:murmur:capsule:v1";

/// The 1.0 card's JSON: only the 1.0 schema's fields.
pub fn agent_card_v10(c: &CardInfo) -> Value {
    let name = non_empty(c.name, "capsule");
    let version = non_empty(c.version, "0.0.0");
    let generated = format!("Murmur capsule {name} {version}");
    let description = match c.description {
        Some(d) if !d.trim().is_empty() => d.to_string(),
        _ => generated,
    };
    let url = format!("http://127.0.0.1:{}/", c.port);
    let mut v = json!({
        "name": name,
        "version": version,
        "description": description,
        "capabilities": {
            "streaming": c.streaming,
            "pushNotifications": c.push,
            "extensions": [{
                "uri": CAPSULE_EXTENSION,
                "description": "What the capsule's manifest grants it: its model-visible tools, shell and network.",
                "required": false,
                "params": {"tools": c.tools, "shell": c.shell, "network": c.network},
            }],
        },
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "defaultInputModes": c.input_modes,
        "defaultOutputModes": c.output_modes,
        "skills": [{
            "id": "task",
            "name": "Task",
            "description": format!("Runs a task given as text on {name} and answers with an artifact named response."),
            "tags": ["task", "murmur"],
        }],
    });
    if c.auth {
        v["capabilities"]["extendedAgentCard"] = json!(true);
        v["securitySchemes"] = json!({BEARER_SCHEME: {"httpAuthSecurityScheme": {
            "scheme": "Bearer", "bearerFormat": BEARER_FORMAT, "description": BEARER_DESCRIPTION,
        }}});
        v["securityRequirements"] = json!([{"schemes": {BEARER_SCHEME: {"list": []}}}]);
    }
    v
}

/// The card's JSON for a GET that does not name 1.0: the 1.0 card, the spec's fields and
/// 0.3's discovery fields.
pub fn agent_card(c: &CardInfo) -> Value {
    let mut v = agent_card_v10(c);
    let url = format!("http://localhost:{}/", c.port);
    v["url"] = json!(url);
    v["protocolVersion"] = json!("0.3.0");
    v["preferredTransport"] = json!("JSONRPC");
    v["additionalInterfaces"] = json!([{"url": url, "transport": "JSONRPC"}]);
    let caps = &mut v["capabilities"];
    caps["tools"] = json!(c.tools);
    caps["shell"] = json!(c.shell);
    caps["network"] = json!(c.network);
    if c.auth {
        v["supportsAuthenticatedExtendedCard"] = json!(true);
        v["securitySchemes"] = json!({BEARER_SCHEME: {
            "type": "http", "scheme": "bearer", "bearerFormat": BEARER_FORMAT,
            "description": BEARER_DESCRIPTION,
        }});
        v["security"] = json!([{BEARER_SCHEME: []}]);
        if let Some(o) = v.as_object_mut() {
            o.remove("securityRequirements");
        }
    }
    v
}

/// What a card of either form shows a caller with no token: the card less what the
/// manifest grants the capsule (the capsule extension; `tools`, `shell`, `network`).
pub fn public_card(mut v: Value) -> Value {
    if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut) {
        caps.remove("tools");
        caps.remove("shell");
        caps.remove("network");
        if let Some(Value::Array(exts)) = caps.get_mut("extensions") {
            exts.retain(|e| e.get("uri").and_then(Value::as_str) != Some(CAPSULE_EXTENSION));
            if exts.is_empty() {
                caps.remove("extensions");
            }
        }
    }
    v
}

/// A card as body bytes.
pub fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
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
            auth: false,
            input_modes: vec!["text/plain".into()],
            output_modes: vec!["text/plain".into()],
            push: false,
        }
    }

    #[test]
    fn the_1_0_card_holds_the_1_0_fields_only_and_the_capsule_extension() {
        let tools = vec!["grep".to_string()];
        let v = agent_card_v10(&info(&tools));
        let url = "http://127.0.0.1:4242/";
        assert_eq!(
            v,
            json!({
                "name": "echo",
                "version": "1.2.3",
                "description": "Echoes.",
                "capabilities": {"streaming": true, "pushNotifications": false,
                    "extensions": [{"uri": "urn:murmur:capsule:v1",
                        "description": "What the capsule's manifest grants it: its model-visible tools, shell and network.",
                        "required": false,
                        "params": {"tools": ["grep"], "shell": true, "network": false}}]},
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

    #[test]
    fn the_merged_card_adds_the_spec_and_0_3_fields() {
        let tools = vec!["grep".to_string()];
        let merged = agent_card(&info(&tools));
        let v10 = agent_card_v10(&info(&tools));
        let mut added: Vec<&str> = merged
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| v10.get(k.as_str()).is_none())
            .map(String::as_str)
            .collect();
        added.sort();
        assert_eq!(
            added,
            [
                "additionalInterfaces",
                "preferredTransport",
                "protocolVersion",
                "url"
            ]
        );
        assert_eq!(merged["url"], "http://localhost:4242/");
        assert_eq!(merged["protocolVersion"], "0.3.0");
        assert_eq!(merged["preferredTransport"], "JSONRPC");
        assert_eq!(
            merged["additionalInterfaces"],
            json!([{"url": "http://localhost:4242/", "transport": "JSONRPC"}])
        );
        let caps = &merged["capabilities"];
        assert_eq!(
            (
                &caps["tools"],
                &caps["shell"],
                &caps["network"],
                &caps["streaming"]
            ),
            (&json!(["grep"]), &json!(true), &json!(false), &json!(true))
        );
        for k in ["name", "version", "description", "supportedInterfaces", "skills"] {
            assert_eq!(merged[k], v10[k], "{k}");
        }
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
        assert_required(&agent_card_v10(&info(&[])));
        let bare = CardInfo {
            name: "",
            version: " ",
            description: Some("  "),
            port: 0,
            tools: &[],
            shell: false,
            network: false,
            streaming: false,
            auth: false,
            input_modes: vec!["text/plain".into()],
            output_modes: vec!["text/plain".into()],
            push: false,
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
        let v = agent_card(&info(&[]));
        assert_eq!(serde_json::from_slice::<Value>(&body(&v)).unwrap(), v);
    }

    #[test]
    fn an_authenticated_door_names_its_scheme_in_each_form_and_hides_its_grants() {
        let tools = vec!["grep".to_string()];
        let c = CardInfo {
            auth: true,
            ..info(&tools)
        };
        let v10 = agent_card_v10(&c);
        assert_eq!(v10["capabilities"]["extendedAgentCard"], true);
        assert_eq!(
            v10["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(
            v10["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}])
        );
        let merged = agent_card(&c);
        assert_eq!(merged["securitySchemes"]["bearer"]["type"], "http");
        assert_eq!(merged["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert_eq!(merged["security"], json!([{"bearer": []}]));
        assert_eq!(merged["supportsAuthenticatedExtendedCard"], true);
        assert!(merged.get("securityRequirements").is_none());
        let public = public_card(merged.clone());
        for k in ["tools", "shell", "network", "extensions"] {
            assert!(public["capabilities"].get(k).is_none(), "{k}");
        }
        assert_eq!(public["security"], merged["security"]);
        assert_required(&public);
        let public = public_card(v10.clone());
        assert!(public["capabilities"].get("extensions").is_none());
        assert_eq!(public["securitySchemes"], v10["securitySchemes"]);
        assert_required(&public);
        let open = agent_card(&info(&tools));
        for k in ["security", "securitySchemes", "supportsAuthenticatedExtendedCard"] {
            assert!(open.get(k).is_none(), "{k}");
        }
    }
}
