//! `GET /.well-known/agent-card.json`: the card in the form the request's `A2A-Version`
//! names (1.0, or the merged form for 0.3 and for no header), with caching headers: a
//! `Cache-Control: max-age`, an `ETag` per form, `Last-Modified` (when the door opened),
//! `Vary: A2A-Version`, and `304` for an `If-None-Match` that names the form's tag.

use super::Route;
use crate::a2a::rpc::is_supported_v10;
use crate::http::{Exchange, Reply, Request, Response};
use crate::resources::body::hex;
use sha2::Digest;

/// How long a client may reuse a card, seconds: it is fixed for the session, and a port is
/// reused by the next session only after this one ends.
pub const MAX_AGE_SECS: u32 = 300;

/// One form of the card: its bytes and their tag.
struct Form {
    body: Vec<u8>,
    etag: String,
}

impl Form {
    fn new(body: Vec<u8>) -> Form {
        let digest = sha2::Sha256::digest(&body);
        let etag = format!("\"{}\"", &hex(&digest)[..32]);
        Form { body, etag }
    }
}

/// The card route: the merged form and the 1.0 form.
pub struct CardRoute {
    merged: Form,
    v10: Form,
    last_modified: String,
}

impl CardRoute {
    /// The two forms, made when the door opened at `opened_ms`.
    pub fn new(merged: Vec<u8>, v10: Vec<u8>, opened_ms: u64) -> CardRoute {
        CardRoute {
            merged: Form::new(merged),
            v10: Form::new(v10),
            last_modified: crate::a2a::shapes::http_date(opened_ms),
        }
    }
}

/// Whether an `If-None-Match` value names `etag` (a list, `*`, weak tags compared weakly).
fn matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

impl Route for CardRoute {
    fn answer(&self, req: &Request, _: &Exchange<'_>) -> Option<Reply> {
        if req.path() != "/.well-known/agent-card.json" {
            return None;
        }
        if !matches!(req.method.as_str(), "GET" | "HEAD") {
            return Some(Reply::Now(
                Response::error(405, "method not allowed").header("allow", "GET, HEAD"),
            ));
        }
        let form = match req.header("a2a-version") {
            Some(v) if is_supported_v10(v) => &self.v10,
            _ => &self.merged,
        };
        let fresh = req
            .header("if-none-match")
            .is_some_and(|v| matches(v, &form.etag));
        let resp = if fresh {
            Response::new(304)
        } else {
            Response::json(200, form.body.clone())
        };
        Some(Reply::Now(
            resp.header("cache-control", &format!("max-age={MAX_AGE_SECS}"))
                .header("etag", &form.etag)
                .header("last-modified", &self.last_modified)
                .header("vary", "A2A-Version"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_names_a_tag_in_a_list_weakly_or_by_star() {
        let tag = "\"abc\"";
        for yes in ["\"abc\"", "W/\"abc\"", "\"x\", \"abc\"", "*", " \"abc\" "] {
            assert!(matches(yes, tag), "{yes}");
        }
        for no in ["\"abd\"", "abc", "", "\"ab\""] {
            assert!(!matches(no, tag), "{no}");
        }
    }
}
