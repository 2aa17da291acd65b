//! The loopback guard: a listener on 127.0.0.1 answers only requests that a local process
//! addressed to it, never one a web page made a browser send. Here too the [`Refusal`]s of
//! a request head, each with its status and reason.
//!
//! A page on any site can make a browser send a "simple" request to `127.0.0.1:P` (a
//! `text/plain` POST needs no CORS preflight), and DNS rebinding lets it send any request
//! at all under a name of its own. Three rules close both. The first two are enforced by
//! the server for every listener (while the head is parsed, before any body is read, and
//! before any route runs), so the roost and the capsule door share one implementation:
//!
//! 1. exactly one `host` header, naming `127.0.0.1:P` or `localhost:P`, where P is the
//!    listener's bound port and the host part is case-insensitive (port 80 may be left
//!    out). None at all (an HTTP/1.0 request) is 400, two are 400, any other value is 421;
//! 2. no `origin` header at all: a browser sends one on every cross-origin request and on
//!    every POST, and this project's own clients never do. One is 403;
//! 3. a POST body is `application/json` ([`require_json`], called by the routes that take
//!    a body, after routing, so an unknown path is still a 404). Anything else is 415.

use super::Response;

/// 400: the request names no host (HTTP/1.0 without `host`).
pub const MISSING_HOST: &str = "missing host header: this server answers only requests addressed to 127.0.0.1 or localhost at its own port";
/// 400: two or more `host` headers.
pub const DUPLICATE_HOST: &str = "more than one host header";
/// 421: a `host` that is not this listener (a DNS-rebound name, another port).
pub const MISDIRECTED: &str = "misdirected request: the host header does not name this server; it answers only 127.0.0.1 or localhost at its own port";
/// 403: the request carries `origin`, so a browser sent it on a web page's behalf.
pub const CROSS_ORIGIN: &str =
    "cross-origin request refused: this server answers no request that carries an Origin header";
/// 415: a POST whose body is not declared as JSON.
pub const NOT_JSON: &str =
    "unsupported media type: a POST body must be sent with content-type: application/json";

/// Rules 1 and 2 on a parsed head: `headers` names lowercase, `port` the bound port.
pub fn check_head(headers: &[(String, Vec<u8>)], port: u16) -> Result<(), Refusal> {
    let mut hosts = headers.iter().filter(|(n, _)| n == "host");
    match (hosts.next(), hosts.next()) {
        (None, _) => return Err(Refusal::MissingHost),
        (Some(_), Some(_)) => return Err(Refusal::BadRequest(DUPLICATE_HOST)),
        (Some((_, value)), None) if !names_this_server(value, port) => return Err(Refusal::Misdirected),
        (Some(_), None) => {}
    }
    if headers.iter().any(|(n, _)| n == "origin") {
        return Err(Refusal::CrossOrigin);
    }
    Ok(())
}

/// Whether a `host` value is `127.0.0.1:port` or `localhost:port` (host part in any case;
/// the port written exactly as the number, and only port 80 may be left out).
pub fn names_this_server(value: &[u8], port: u16) -> bool {
    let value = value.trim_ascii();
    let (name, written) = match value.iter().rposition(|&b| b == b':') {
        Some(i) => (&value[..i], Some(&value[i + 1..])),
        None => (value, None),
    };
    let port_ok = match written {
        Some(p) => p == port.to_string().as_bytes(),
        None => port == 80,
    };
    port_ok && (name == b"127.0.0.1" || name.eq_ignore_ascii_case(b"localhost"))
}

/// Why a request was refused; each maps to one status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: framing or syntax the server will not guess about.
    BadRequest(&'static str),
    /// 431: head larger than `max_head` or more than `max_headers` fields.
    HeadTooLarge,
    /// 413: declared body larger than `max_body`.
    BodyTooLarge,
    /// 400: no `host` header, so the request cannot be shown to be addressed to us.
    MissingHost,
    /// 421: a `host` naming anything but this loopback listener (DNS rebinding).
    Misdirected,
    /// 403: an `origin` header, so a browser sent it for a web page.
    CrossOrigin,
}

impl Refusal {
    /// The status code this refusal is answered with.
    pub fn status(self) -> u16 {
        match self {
            Refusal::BadRequest(_) | Refusal::MissingHost => 400,
            Refusal::HeadTooLarge => 431,
            Refusal::BodyTooLarge => 413,
            Refusal::Misdirected => 421,
            Refusal::CrossOrigin => 403,
        }
    }

    /// A short human reason, used as the error body.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::BadRequest(why) => why,
            Refusal::HeadTooLarge => "request header fields too large",
            Refusal::BodyTooLarge => "request body too large",
            Refusal::MissingHost => MISSING_HOST,
            Refusal::Misdirected => MISDIRECTED,
            Refusal::CrossOrigin => CROSS_ORIGIN,
        }
    }
}

/// Rule 3: exactly one `content-type`, whose media type is `application/json` in any case,
/// with any parameters (`; charset=utf-8`). Otherwise the 415 to answer with.
pub fn require_json(headers: &[(String, Vec<u8>)]) -> Result<(), Response> {
    let mut types = headers.iter().filter(|(n, _)| n == "content-type");
    let json = match (types.next(), types.next()) {
        (Some((_, value)), None) => {
            let media = value.split(|&b| b == b';').next().unwrap_or_default();
            media.trim_ascii().eq_ignore_ascii_case(b"application/json")
        }
        _ => false,
    };
    if json {
        Ok(())
    } else {
        Err(Response::error(415, NOT_JSON))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn host_names_only_this_listener() {
        for ok in [
            "127.0.0.1:7700",
            "localhost:7700",
            "LocalHost:7700",
            "LOCALHOST:7700",
            " localhost:7700 ",
        ] {
            assert!(names_this_server(ok.as_bytes(), 7700), "{ok}");
        }
        for bad in [
            "evil.example:7700",
            "127.0.0.1:7701",
            "127.0.0.1:07700",
            "127.0.0.1:+7700",
            "127.0.0.1",
            "localhost",
            "localhost.:7700",
            "127.0.0.2:7700",
            "[::1]:7700",
            "0.0.0.0:7700",
            "localhost:7700:7700",
            "",
            ":7700",
            "user@localhost:7700",
        ] {
            assert!(!names_this_server(bad.as_bytes(), 7700), "{bad}");
        }
        assert!(names_this_server(b"localhost", 80));
        assert!(names_this_server(b"127.0.0.1:80", 80));
    }

    #[test]
    fn check_order_host_then_origin() {
        let check = |fields: &[(&str, &str)]| check_head(&head(fields), 7700);
        assert_eq!(check(&[("host", "127.0.0.1:7700")]), Ok(()));
        assert_eq!(check(&[]), Err(Refusal::MissingHost));
        assert_eq!(
            check(&[("host", "localhost:7700"), ("host", "localhost:7700")]),
            Err(Refusal::BadRequest(DUPLICATE_HOST))
        );
        assert_eq!(
            check(&[("host", "evil.example:7700"), ("origin", "http://evil.example")]),
            Err(Refusal::Misdirected)
        );
        assert_eq!(
            check(&[("host", "localhost:7700"), ("origin", "null")]),
            Err(Refusal::CrossOrigin)
        );
        assert_eq!(
            check(&[("host", "localhost:7700"), ("origin", "")]),
            Err(Refusal::CrossOrigin)
        );
    }

    #[test]
    fn json_media_type_with_parameters() {
        let post = |types: &[&str]| {
            let headers: Vec<(String, Vec<u8>)> = types
                .iter()
                .map(|t| ("content-type".to_string(), t.as_bytes().to_vec()))
                .collect();
            require_json(&headers).map_err(|r| r.status)
        };
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            " application/json ;charset=UTF-8",
        ] {
            assert_eq!(post(&[ok]), Ok(()), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "application/json-seq",
            "",
        ] {
            assert_eq!(post(&[bad]), Err(415), "{bad}");
        }
        assert_eq!(post(&[]), Err(415));
        assert_eq!(post(&["application/json", "application/json"]), Err(415));
    }
}
