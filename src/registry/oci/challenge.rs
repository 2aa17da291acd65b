//! A registry's `WWW-Authenticate` answer (RFC 7235 §4.1, as the distribution token flow
//! uses it): the first `Bearer` challenge (realm, service, scope) or `Basic` one. Anything
//! malformed is an error, never a guess; the parser is fuzzed.

/// A challenge this client can answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// Fetch a token from `realm` (with `service` and `scope` as query parameters).
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
    /// Send the operator's credentials as Basic.
    Basic,
}

/// A challenge's auth-params, as (name, value).
type Params = Vec<(String, String)>;

/// Longest header judged.
const MAX_HEADER: usize = 8 * 1024;

/// The first Bearer or Basic challenge in `header`; a header holding neither, or not of
/// the grammar, is an error.
pub fn parse(header: &str) -> Result<Challenge, String> {
    if header.len() > MAX_HEADER {
        return Err("the WWW-Authenticate header is too long".into());
    }
    let mut rest = header.trim_start();
    while !rest.is_empty() {
        let (scheme, after) = token(rest).ok_or("a challenge without a scheme")?;
        let (params, after) = params(after)?;
        match scheme.to_ascii_lowercase().as_str() {
            "bearer" => {
                let get = |k: &str| {
                    params
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(k))
                        .map(|(_, v)| v.clone())
                };
                let realm = get("realm").ok_or("a Bearer challenge without a realm")?;
                return Ok(Challenge::Bearer {
                    realm,
                    service: get("service"),
                    scope: get("scope"),
                });
            }
            "basic" => return Ok(Challenge::Basic),
            _ => rest = after,
        }
    }
    Err("no Bearer or Basic challenge".into())
}

/// A token (RFC 7230 tchar) at the start of `s`, and what follows it.
fn token(s: &str) -> Option<(&str, &str)> {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let end = s.find(|c: char| !tchar(c)).unwrap_or(s.len());
    (end > 0).then(|| (&s[..end], &s[end..]))
}

/// The auth-params after a scheme, up to the next challenge: `name=token` or
/// `name="quoted"`, separated by commas. Returns them and the rest (the next challenge).
fn params(mut s: &str) -> Result<(Params, &str), String> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', '\t', ',']);
        let Some((name, after)) = token(s) else {
            return Ok((out, s));
        };
        let after_ws = after.trim_start_matches([' ', '\t']);
        let Some(value_part) = after_ws.strip_prefix('=') else {
            // A token not followed by `=` starts the next challenge.
            return Ok((out, s));
        };
        let value_part = value_part.trim_start_matches([' ', '\t']);
        let (value, rest) = if let Some(q) = value_part.strip_prefix('"') {
            quoted(q)?
        } else {
            let (v, rest) = token(value_part).ok_or_else(|| format!("the parameter {name} has no value"))?;
            (v.to_string(), rest)
        };
        if out.len() >= 16 {
            return Err("too many challenge parameters".into());
        }
        out.push((name.to_string(), value));
        s = rest.trim_start_matches([' ', '\t']);
        if !s.is_empty() && !s.starts_with(',') {
            return Err(format!("junk after the parameter {name}"));
        }
    }
}

/// A quoted string's content (after the opening quote), unescaped, and the rest.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, e)) => out.push(e),
                None => break,
            },
            c if c.is_control() => return Err("a control character in a quoted string".into()),
            c => out.push(c),
        }
    }
    Err("an unterminated quoted string".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_challenges() {
        assert_eq!(
            parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#
            ),
            Ok(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull".into()),
            })
        );
        assert_eq!(parse(r#"Basic realm="Registry Realm""#), Ok(Challenge::Basic));
        assert_eq!(
            parse(r#"Newauth realm="x", type=1, Bearer realm="http://127.0.0.1:1/t""#),
            Ok(Challenge::Bearer {
                realm: "http://127.0.0.1:1/t".into(),
                service: None,
                scope: None,
            })
        );
        assert_eq!(
            parse(r#"bearer REALM="a\"b""#),
            Ok(Challenge::Bearer {
                realm: "a\"b".into(),
                service: None,
                scope: None
            })
        );
    }

    #[test]
    fn malformed_challenges_are_errors() {
        for bad in [
            "",
            "Bearer",
            r#"Bearer service="x""#,
            r#"Bearer realm="x"#,
            r#"Bearer realm="x" junk"#,
            "Bearer realm=",
            "Negotiate",
            "\"Bearer\"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(parse(&format!("Bearer realm=\"{}\"", "a".repeat(9000))).is_err());
    }
}
