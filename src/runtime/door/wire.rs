//! The door's bytes: SSE frames of JSON-RPC results, JSON-RPC answers as HTTP 200, and the
//! ids it mints (`tsk_`, `ctx_`, `msg_` and 32 random hex digits).

use crate::a2a::rpc;
use crate::http::Response;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The SSE frame of one JSON-RPC result.
pub fn frame(id: &Value, result: Value) -> Vec<u8> {
    let result = serde_json::to_vec(&result).unwrap_or_else(|_| b"null".to_vec());
    let id = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
    let mut out = Vec::new();
    for part in parts(&id, &result) {
        out.extend_from_slice(part);
    }
    out
}

/// `data: {"id":…,"jsonrpc":"2.0","result":…}` and a blank line, from serialised parts: its
/// length, and how to build it (only once there is room for it).
pub(super) fn framed<'a>(id: &'a [u8], result: &'a [u8]) -> (usize, impl FnOnce() -> Vec<u8> + 'a) {
    let len = parts(id, result).iter().map(|p| p.len()).sum();
    (len, move || {
        let mut out = Vec::with_capacity(len);
        for part in parts(id, result) {
            out.extend_from_slice(part);
        }
        out
    })
}

fn parts<'a>(id: &'a [u8], result: &'a [u8]) -> [&'a [u8]; 5] {
    [
        b"data: {\"id\":",
        id,
        b",\"jsonrpc\":\"2.0\",\"result\":",
        result,
        b"}\n\n",
    ]
}

/// A JSON-RPC answer as an HTTP 200.
pub fn answer(v: &Value) -> Response {
    Response::json(200, rpc::to_body(v))
}

/// `<prefix>_` and 32 random lowercase hex digits. The random bytes come from a pool
/// refilled 4 KiB at a time (a send mints three ids; one syscall each would be most of its
/// cost).
pub(super) fn id_of(prefix: &str) -> String {
    use std::fmt::Write;
    static POOL: Mutex<(Vec<u8>, usize)> = Mutex::new((Vec::new(), 0));
    let mut bytes = [0u8; 16];
    {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        if pool.1 + 16 > pool.0.len() {
            let mut fresh = vec![0u8; 4096];
            match getrandom::fill(&mut fresh) {
                Ok(()) => *pool = (fresh, 0),
                Err(_) => {
                    // No randomness: a process-unique counter still keeps ids distinct.
                    static N: AtomicU64 = AtomicU64::new(0);
                    return format!("{prefix}_{:032x}", N.fetch_add(1, Ordering::SeqCst));
                }
            }
        }
        let at = pool.1;
        bytes.copy_from_slice(&pool.0[at..at + 16]);
        pool.1 += 16;
    }
    let mut out = String::with_capacity(prefix.len() + 33);
    out.push_str(prefix);
    out.push('_');
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frame_is_one_data_line_holding_the_json_rpc_result() {
        for id in [json!("a\"b"), json!(7), Value::Null] {
            let result = json!({"kind": "status-update", "text": "line\nbreak"});
            let f = frame(&id, result.clone());
            let text = String::from_utf8(f).unwrap();
            let body = text.strip_prefix("data: ").unwrap().strip_suffix("\n\n").unwrap();
            assert!(!body.contains('\n'), "one line: {body}");
            let v: Value = serde_json::from_str(body).unwrap();
            assert_eq!(v, rpc::result_response(&id, result));
            let (len, build) = framed(b"1", b"{}");
            assert_eq!(build().len(), len);
        }
    }

    #[test]
    fn ids_are_a_prefix_and_32_distinct_hex_digits() {
        let ids: Vec<String> = (0..600).map(|_| id_of("tsk")).collect();
        for id in &ids {
            let hex = id.strip_prefix("tsk_").unwrap();
            assert_eq!(hex.len(), 32);
            assert!(hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "the pool is refilled, never reused");
    }
}
