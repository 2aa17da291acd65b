//! Shared by the murmur inference drivers: the runtime's request and response shapes
//! ([`request`]), the provider-independent call flow ([`drive`]), and on wasm32 the
//! wasi:http POST ([`http`]). Everything but [`http`] is pure and tested natively.

pub mod drive;
#[cfg(target_arch = "wasm32")]
pub mod http;
pub mod outcome;
pub mod request;
pub mod retry;
pub mod url;

pub use drive::{Env, HttpResponse, Provider, TransportError, BODY_CAP};
pub use outcome::{Outcome, Status};
pub use request::{Block, Request, Response, StopReason, ToolCall, Usage};

/// One driver call in a guest: read the WASI env, POST over wasi:http.
#[cfg(target_arch = "wasm32")]
pub fn run<P: Provider>(provider: &P, input: Option<&str>) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    drive::drive(
        provider,
        input,
        &Env::from_process(),
        now,
        |url, headers, body| http::post(url, headers, body, BODY_CAP),
    )
}

#[cfg(test)]
mod tests;
