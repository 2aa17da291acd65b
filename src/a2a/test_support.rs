//! Helpers the `rpc` and `params` tests share: request bodies and the parse of them.

use crate::a2a::params::Call;
use crate::a2a::rpc::{parse_call, RpcError};
use serde_json::{json, Value};

pub const V1: Option<&str> = Some("1.0");

pub fn call(v: Value, ver: Option<&str>) -> Result<Call, RpcError> {
    parse_call(&serde_json::to_vec(&v).unwrap(), ver)
}

pub fn code(v: Value, ver: Option<&str>) -> (i64, Value) {
    let e = call(v, ver).unwrap_err();
    (e.code, e.id)
}

pub fn req(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "abc", "method": method, "params": params})
}
