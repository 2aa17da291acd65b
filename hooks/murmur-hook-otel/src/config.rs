//! The hook's entry `config` (`MURMUR_ARTIFACT_CONFIG`): `{"endpoint": "http://host:port",
//! "timeout_ms": 1000}`. The endpoint is an `http://` or `https://` base URL; spans go to
//! `<endpoint>/v1/traces`.

use driver_common::url::Url;
use serde_json::Value;

/// The longest wait the config may ask for, milliseconds: below the 5 s the runtime gives
/// its async hooks to finish at the session's end, so the session's span is sent (or its
/// loss logged) before the process exits.
pub const MAX_TIMEOUT_MS: u64 = 4_000;
/// The wait when the config names none.
pub const DEFAULT_TIMEOUT_MS: u64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `<endpoint>/v1/traces`.
    pub traces: Url,
    pub timeout_ms: u64,
}

impl Config {
    /// Parse the config text; `None` (no config) is an error naming what is needed.
    pub fn parse(text: Option<&str>) -> Result<Config, String> {
        let text = text.ok_or(
            "murmur-hook-otel needs a config naming its collector: {\"endpoint\": \"http://127.0.0.1:4318\"}",
        )?;
        let v: Value = serde_json::from_str(text).map_err(|e| format!("the config is not JSON: {e}"))?;
        let obj = v.as_object().ok_or("the config is not a JSON object")?;
        for key in obj.keys() {
            if key != "endpoint" && key != "timeout_ms" {
                return Err(format!(
                    "the config has an unknown key '{}'",
                    driver_common::outcome::one_line(key, 60)
                ));
            }
        }
        let endpoint = obj
            .get("endpoint")
            .and_then(Value::as_str)
            .ok_or("the config's endpoint is missing or not a string")?;
        let base = Url::parse(endpoint)?;
        if base.path_and_query.contains('?') {
            return Err("the config's endpoint must not carry a query".into());
        }
        if base.path_and_query.trim_end_matches('/').ends_with("/v1/traces") {
            return Err(
                "the config's endpoint is the collector's base URL: /v1/traces is appended to it".into(),
            );
        }
        let timeout_ms = match obj.get("timeout_ms") {
            None => DEFAULT_TIMEOUT_MS,
            Some(t) => match t.as_u64() {
                Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => ms,
                _ => {
                    return Err(format!(
                        "the config's timeout_ms must be a whole number from 1 to {MAX_TIMEOUT_MS}"
                    ))
                }
            },
        };
        Ok(Config {
            traces: base.join("/v1/traces"),
            timeout_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_gets_the_traces_path_and_a_default_wait() {
        let c = Config::parse(Some(r#"{"endpoint": "http://127.0.0.1:4318/"}"#)).unwrap();
        assert_eq!(c.traces.authority, "127.0.0.1:4318");
        assert_eq!(c.traces.path_and_query, "/v1/traces");
        assert_eq!(c.timeout_ms, DEFAULT_TIMEOUT_MS);
        let c = Config::parse(Some(
            r#"{"endpoint": "https://otel.example/base", "timeout_ms": 250}"#,
        ))
        .unwrap();
        assert!(c.traces.https);
        assert_eq!(c.traces.path_and_query, "/base/v1/traces");
        assert_eq!(c.timeout_ms, 250);
    }

    #[test]
    fn a_bad_config_is_an_error_naming_what_is_wrong() {
        assert!(Config::parse(None).unwrap_err().contains("needs a config"));
        for (text, says) in [
            ("[]", "not a JSON object"),
            ("{", "not JSON"),
            ("{}", "endpoint is missing"),
            (r#"{"endpoint": "ftp://x"}"#, "not an http"),
            (r#"{"endpoint": "http://u@x"}"#, "credentials"),
            (r#"{"endpoint": "http://x?a=1"}"#, "query"),
            (r#"{"endpoint": "http://x", "timeout_ms": 0}"#, "timeout_ms"),
            (r#"{"endpoint": "http://x", "timeout_ms": 4001}"#, "timeout_ms"),
            (r#"{"endpoint": "http://x:4318/v1/traces"}"#, "base URL"),
            (r#"{"endpoint": "http://x", "timeout_ms": "5"}"#, "timeout_ms"),
            (
                r#"{"endpoint": "http://x", "headers": {}}"#,
                "unknown key 'headers'",
            ),
        ] {
            let e = Config::parse(Some(text)).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
