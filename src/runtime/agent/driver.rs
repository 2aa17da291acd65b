//! One turn's driver call: a fresh instance of the driver component per attempt, on the
//! driver's (possibly narrowed) grants with the provider credential attached by the host,
//! the deadline and limiter per call, and the retry policy: a transient failure (the
//! driver's `transient: true`, a 408/429/5xx the host saw from the endpoint, or a request
//! to it broken before a response) is retried with capped exponential backoff and jitter,
//! at most [`MAX_TRIES`] tries, honouring `retry-after` up to [`MAX_RETRY_AFTER`]; any other
//! 4xx is final.

use super::grants::GuestGrants;
use crate::agent::redact;
use crate::agent::wire::{self, Block, Response};
use crate::runtime::wasm::credential::{Credential, Endpoint, Observed, Observer};
use crate::runtime::wasm::tool::{trap_line, PreparedTool, ToolStatus};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest request (the whole conversation) sent to a driver, bytes.
pub const MAX_REQUEST_BYTES: usize = 32 << 20;
/// Tries per turn, the first included.
pub const MAX_TRIES: u32 = 3;
/// The first backoff; each retry doubles it, up to [`MAX_BACKOFF`].
pub const BASE_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// The longest `retry-after` honoured; a longer one is waited this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The inference driver of a session.
pub struct Driver {
    pub name: String,
    prepared: PreparedTool,
    grants: GuestGrants,
    credential: Option<Arc<Credential>>,
    /// `inference.endpoint`: the driver's calls to it share kept connections.
    endpoint: Option<Arc<Endpoint>>,
    observer: Observer,
    /// The key, blanked out of everything a driver returns (a provider or proxy that
    /// echoes the key in an error or an answer must not have it written anywhere).
    redact: Option<String>,
}

/// One retry, for the trace.
#[derive(Debug, Clone)]
pub struct Retry {
    pub attempt: u32,
    pub reason: String,
    pub delay: Duration,
}

/// Whether a failed attempt is worth another, and how long to wait.
fn retry_plan(
    observed: &Observed,
    driver_transient: bool,
    driver_retry_after: Option<u64>,
) -> Option<Option<Duration>> {
    let host_transient = match observed.status {
        Some(s) if s == 408 || s == 429 || s >= 500 => Some(true),
        Some(s) if (400..500).contains(&s) => Some(false),
        _ => None,
    };
    let transient = match host_transient {
        Some(t) => t,
        None => observed.broken || driver_transient,
    };
    if !transient {
        return None;
    }
    let after = observed.retry_after.or(driver_retry_after);
    Some(after.map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER)))
}

/// The wait before try `attempt + 1` (`attempt` from 1): `retry-after` when given, else
/// the doubling backoff with ±25% jitter.
fn delay(attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(d) = retry_after {
        return d;
    }
    let base = BASE_BACKOFF
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(MAX_BACKOFF);
    let mut r = [0u8; 1];
    let jitter = match getrandom::fill(&mut r) {
        Ok(()) => f64::from(r[0]) / 255.0 * 0.5 + 0.75,
        Err(_) => 1.0,
    };
    base.mul_f64(jitter)
}

impl Driver {
    pub fn new(
        name: &str,
        prepared: PreparedTool,
        grants: GuestGrants,
        credential: Option<Credential>,
        endpoint: Option<Endpoint>,
        key: Option<String>,
    ) -> Driver {
        Driver {
            name: name.to_string(),
            prepared,
            grants,
            credential: credential.map(Arc::new),
            endpoint: endpoint.map(Arc::new),
            observer: Arc::new(Mutex::new(Observed::default())),
            redact: key.filter(|k| !k.is_empty()),
        }
    }

    fn clean(&self, text: &str) -> String {
        redact::text(text, self.redact.as_deref())
    }

    /// A parsed response with the key blanked from every text and tool input, whatever
    /// JSON escapes carried it past the raw scrub.
    fn scrub(&self, mut r: Response) -> Response {
        let Some(key) = self.redact.as_deref() else {
            return r;
        };
        for b in &mut r.content {
            match b {
                Block::Text(t) if t.contains(key) => *t = redact::text(t, Some(key)),
                Block::ToolCall { input, .. } => {
                    let s = input.to_string();
                    if s.contains(key) {
                        *input = serde_json::from_str(&redact::text(&s, Some(key))).unwrap_or(Value::Null);
                    }
                }
                _ => {}
            }
        }
        r
    }

    /// Call the driver with `request` until a response, a final failure, or the tries run
    /// out; `on_retry` hears each retry before its wait.
    pub fn call(&self, data: String, mut on_retry: impl FnMut(&Retry)) -> Result<Response, String> {
        if data.len() > MAX_REQUEST_BYTES {
            return Err(format!(
                "the conversation is {} bytes, more than the {MAX_REQUEST_BYTES} a driver is sent",
                data.len()
            ));
        }
        let mut attempt = 1u32;
        loop {
            *self.observer.lock().unwrap_or_else(|p| p.into_inner()) = Observed::default();
            let host = self
                .grants
                .host(
                    self.credential.clone(),
                    Some(self.observer.clone()),
                    self.endpoint.clone(),
                )
                .map_err(|e| format!("cannot prepare the driver's grants: {e}"))?;
            let reply = self
                .prepared
                .call(host, self.grants.deadline, data.clone())
                .map_err(|d| d.message)?;
            let reply = match reply {
                Ok(r) => r,
                Err(trap) => {
                    let line = redact::text(&trap_line(&trap), self.redact.as_deref());
                    return Err(format!("driver {}: {line}", self.name));
                }
            };
            if reply.status == ToolStatus::Passed {
                let data = reply
                    .data
                    .as_deref()
                    .ok_or_else(|| format!("driver {} returned no data", self.name))?;
                let data = redact::text(data, self.redact.as_deref());
                return wire::parse_response(&data).map(|r| self.scrub(r)).map_err(|e| {
                    let e = crate::agent::sanitize::one_line(&e, 2000);
                    format!("driver {}: unparsable response: {}", self.name, self.clean(&e))
                });
            }
            let observed = self.observer.lock().unwrap_or_else(|p| p.into_inner()).clone();
            // The host's words for a request that got no response ("cannot resolve HOST")
            // before the driver's, which can only relay the code it was handed.
            let message = match &observed.failure {
                Some(why) => format!("driver {}: {why}", self.name),
                None => reply
                    .summary
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or_else(|| format!("driver {} failed ({})", self.name, reply.status.as_str())),
            };
            let message = self.clean(&crate::agent::sanitize::one_line(&self.clean(&message), 2000));
            let plan = retry_plan(
                &observed,
                reply.meta("transient") == Some("true"),
                reply.meta("retry_after").and_then(|s| s.trim().parse().ok()),
            );
            match plan {
                Some(after) if attempt < MAX_TRIES => {
                    let wait = delay(attempt, after);
                    on_retry(&Retry {
                        attempt,
                        reason: message,
                        delay: wait,
                    });
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                Some(_) => return Err(format!("{message} (after {MAX_TRIES} tries)")),
                None => return Err(message),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(status: Option<u16>, retry_after: Option<u64>, broken: bool) -> Observed {
        Observed {
            status,
            retry_after,
            broken,
            failure: None,
        }
    }

    #[test]
    fn the_host_view_decides_before_the_driver_claim() {
        assert_eq!(
            retry_plan(&seen(Some(429), Some(2), false), false, None),
            Some(Some(Duration::from_secs(2)))
        );
        assert_eq!(retry_plan(&seen(Some(503), None, false), false, None), Some(None));
        assert_eq!(retry_plan(&seen(Some(408), None, false), false, None), Some(None));
        assert_eq!(
            retry_plan(&seen(Some(401), None, false), true, None),
            None,
            "a 4xx is final whatever the driver says"
        );
        assert_eq!(
            retry_plan(&seen(None, None, true), false, None),
            Some(None),
            "broken before a response"
        );
        assert_eq!(
            retry_plan(&seen(Some(200), None, false), true, Some(1)),
            Some(Some(Duration::from_secs(1)))
        );
        assert_eq!(retry_plan(&seen(Some(200), None, false), false, None), None);
        assert_eq!(
            retry_plan(&seen(Some(429), Some(3600), false), false, None),
            Some(Some(MAX_RETRY_AFTER)),
            "retry-after is capped"
        );
    }

    #[test]
    fn an_echoed_key_is_blanked() {
        assert_eq!(
            redact::text("bad key sk-1 given", Some("sk-1")),
            "bad key [redacted] given"
        );
        assert_eq!(redact::text("nothing", Some("sk-1")), "nothing");
        assert_eq!(redact::text("x", Some("")), "x");
        assert_eq!(redact::text("x", None), "x");
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for attempt in 1..=8 {
            let d = delay(attempt, None);
            let base = BASE_BACKOFF.saturating_mul(1 << (attempt - 1)).min(MAX_BACKOFF);
            assert!(
                d >= base.mul_f64(0.74) && d <= base.mul_f64(1.26),
                "{attempt}: {d:?}"
            );
        }
        assert_eq!(delay(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
    }
}
