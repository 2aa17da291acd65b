//! `fetch-peer-file`: the peer is checked against `capabilities.peer_fetch.allow` before any
//! connection opens; the redeem asserts this capsule's own card identity in
//! `x-murmur-audience`; the body is streamed into a temp file under `peer-in/` (through
//! [`crate::fsx`]), hashed as it lands, checked against the peer's etag, and only then
//! renamed to `peer-in/<handle_id>-<sanitised basename>`. Nothing is left behind on failure
//! and the bytes never reach the model as text.

use super::{field, shown, Outcome, Peer, PeerTools, Refused};
use crate::fsx::Dir;
use crate::http::client::{self, ClientError, Options};
use crate::manifest::netrule::{any_covers, NetRule, Scheme};
use crate::resources::peer;
use crate::token::{self, Kind};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{self, Write};
use std::time::Duration;

/// Where fetched files land, relative to the accessible workdir.
pub const PEER_IN: &str = "peer-in";
/// The largest body accepted from a peer, bytes.
pub const MAX_FETCH: u64 = 64 * 1024 * 1024;
/// The longest sanitised basename, characters.
const MAX_BASENAME: usize = 120;

struct Fetched {
    path: String,
    bytes: u64,
    sha256: String,
    generation: Option<u64>,
}

pub(super) fn run(t: &PeerTools, allow: &[NetRule], input: &Value) -> Outcome {
    let handle_id = input.get("handle").and_then(Value::as_str).map(token::token_id);
    let mut peer_shown = input.get("peer").and_then(Value::as_str).map(shown);
    let result = fetch(t, allow, input, &mut peer_shown);
    match result {
        Ok(f) => {
            let event = json!({
                "peer": peer_shown, "handle_id": handle_id, "stored_path": f.path,
                "bytes": f.bytes, "sha256": f.sha256, "outcome": "ok", "reason": null,
            });
            let text = json!({
                "path": f.path, "bytes": f.bytes, "sha256": f.sha256,
                "generation": f.generation, "peer": peer_shown,
            })
            .to_string();
            Outcome {
                text,
                is_error: false,
                event: ("peer_file_fetch", event),
            }
        }
        Err(r) => {
            let event = json!({
                "peer": peer_shown, "handle_id": handle_id, "stored_path": null,
                "bytes": null, "sha256": null, "outcome": r.code, "reason": r.message,
            });
            Outcome {
                text: r.text(),
                is_error: true,
                event: ("peer_file_fetch", event),
            }
        }
    }
}

fn fetch(
    t: &PeerTools,
    allow: &[NetRule],
    input: &Value,
    peer_shown: &mut Option<String>,
) -> Result<Fetched, Refused> {
    let peer_text = field(input, "peer")?;
    let handle = field(input, "handle")?;
    // The shape is checked here too, so nothing but a token's characters reaches the
    // request line; the peer checks it again.
    if token::shape(Kind::PeerHandle, handle).is_err() {
        let r = peer::PeerRefusal::Malformed;
        return Err(Refused::new(r.code(), r.message()));
    }
    let peer = Peer::parse(peer_text).map_err(|e| Refused::new("peer_not_allowed", e))?;
    *peer_shown = Some(peer.authority());
    if !any_covers(allow, &NetRule::destination(Scheme::Http, &peer.host, peer.port)) {
        return Err(Refused::new(
            "peer_not_allowed",
            format!("{} is not in capabilities.peer_fetch.allow", peer.authority()),
        ));
    }
    let handle_id = token::token_id(handle);
    let name = format!("{handle_id}-{}", basename(handle));
    let audience = peer::audience(&t.name, &format!("localhost:{}", t.port));
    let io_error = |e: &dyn std::fmt::Display| Refused::new("io_error", format!("{PEER_IN}/: {e}"));
    let dir = t.work.mkdirs(PEER_IN, 0o755).map_err(|e| io_error(&e))?;
    let (tmp, file) = Temp::create(&dir, &handle_id).map_err(|e| io_error(&e))?;
    let mut sink = Sink {
        file,
        hasher: Sha256::new(),
        bytes: 0,
        failed: None,
    };
    let opts = Options {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(120),
        max_response: 64 * 1024,
        tls: None,
        refuse_loopback: false,
    };
    let url = format!("http://{}/resources/peer/{handle}", peer.authority());
    let got = client::get_into(
        &url,
        &[("x-murmur-audience", &audience)],
        &opts,
        MAX_FETCH,
        &mut sink,
    );
    let resp = match got {
        Ok(r) => r,
        Err(e) => return Err(client_refusal(&peer, e, sink.failed.take())),
    };
    if resp.status != 200 {
        return Err(peer_refusal(&peer, resp.status, &resp.body));
    }
    sink.file.flush().map_err(|e| io_error(&e))?;
    let sha256 = crate::resources::body::hex(&std::mem::take(&mut sink.hasher).finalize());
    let want = format!("\"sha256:{sha256}\"");
    if resp.header("etag") != Some(want.as_str()) {
        return Err(Refused::new(
            "digest_mismatch",
            format!(
                "the bytes from {} do not match the etag it sent",
                peer.authority()
            ),
        ));
    }
    let bytes = sink.bytes;
    drop(sink);
    tmp.keep_as(&name).map_err(|e| io_error(&e))?;
    Ok(Fetched {
        path: format!("{PEER_IN}/{name}"),
        bytes,
        sha256,
        generation: resp.header("x-murmur-generation").and_then(|g| g.parse().ok()),
    })
}

/// The basename the handle's payload names, unverified (the payload is in the clear and
/// only the peer can check it): characters outside `[A-Za-z0-9._-]` become `_`, at most
/// [`MAX_BASENAME`] of them, `file` when nothing is left.
pub(crate) fn basename(handle: &str) -> String {
    let payload = token::shape(Kind::PeerHandle, handle).ok();
    let p = payload
        .as_ref()
        .and_then(|m| m.get("p"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let last = p.rsplit('/').next().unwrap_or("");
    let clean: String = last
        .chars()
        .take(MAX_BASENAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "file".into()
    } else {
        clean
    }
}

/// A refused non-200: the peer's JSON `error` code (when it is one) and `message`.
fn peer_refusal(peer: &Peer, status: u16, body: &[u8]) -> Refused {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let code = v
        .get("error")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .unwrap_or("peer_error");
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .map(|m| crate::agent::sanitize::one_line(m, 300))
        .unwrap_or_else(|| format!("{} answered {status}", peer.authority()));
    Refused::new(code, format!("{} answered {status}: {message}", peer.authority()))
}

/// A failed exchange: the sink's own failure is ours, anything else the peer's.
fn client_refusal(peer: &Peer, e: ClientError, sink: Option<io::Error>) -> Refused {
    match (e, sink) {
        (_, Some(w)) => Refused::new("io_error", format!("{PEER_IN}/: {w}")),
        (ClientError::TooLarge, None) => Refused::new(
            "too_large",
            format!("{} sent more than {MAX_FETCH} bytes", peer.authority()),
        ),
        (e, None) => Refused::new("peer_unreachable", format!("{}: {e}", peer.authority())),
    }
}

/// The body's destination: a temp file, hashed and counted as bytes land.
struct Sink {
    file: std::fs::File,
    hasher: Sha256,
    bytes: u64,
    failed: Option<io::Error>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.write(buf) {
            Ok(n) => {
                self.hasher.update(&buf[..n]);
                self.bytes += n as u64;
                Ok(n)
            }
            Err(e) => {
                self.failed = Some(io::Error::new(e.kind(), e.to_string()));
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A temp file's name in `peer-in/`, removed when dropped unless kept.
struct Temp<'a> {
    dir: &'a Dir,
    name: String,
}

impl<'a> Temp<'a> {
    /// A new temp file (`O_EXCL`, a name no guest can predict) and its handle.
    fn create(dir: &'a Dir, handle_id: &str) -> Result<(Temp<'a>, std::fs::File), crate::fsx::FsError> {
        let r = token::random_hex16().map_err(|e| crate::fsx::FsError::Io {
            path: PEER_IN.into(),
            err: io::Error::other(e.to_string()),
        })?;
        let name = format!(".fetch-{handle_id}-{r}.tmp");
        let file = dir.create_new(&name)?;
        // Readable by the agent's own tools, like every file the runtime writes there.
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o644));
        Ok((Temp { dir, name }, file))
    }

    /// Rename into `name`; the temp name is gone either way.
    fn keep_as(self, name: &str) -> Result<(), crate::fsx::FsError> {
        self.dir.rename(&self.name, name)
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        // After a successful rename the temp name no longer exists: removing it is a no-op.
        let _ = self.dir.remove_file(&self.name);
    }
}
