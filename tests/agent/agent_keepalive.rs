//! A session's model calls through the real `mur run` and the OpenAI driver against a
//! provider that keeps its connections open (`common::kept_provider`; the scripted mock
//! closes after each answer): the calls go over one connection (three before kept
//! connections), with the provider key on each or with none; against one that drops each
//! connection after its answer without saying so, each call gets a new one and the session
//! is not disturbed; a connection whose call was answered with an error (here a 503 the
//! runtime retries) is not kept. Over TLS, the endpoint's certificate is checked against
//! the operator's CA (`MURMUR_CA_FILE`) as a registry's is, and one handshake serves the
//! session; without that CA the provider's certificate is refused and no call is made.

use crate::common;

use common::agent::{Drv, Spec, World, KEY, KEY_VAR};
use common::kept_provider::{KeptProvider, Mode};
use common::provider::Provider;
#[cfg(feature = "tls")]
use common::TempDir;
use serde_json::json;

/// Two `bash` calls of `true`, then `done`.
fn provider(mode: Mode) -> KeptProvider {
    KeptProvider::start(2, "bash", json!({"command": "true"}), mode)
}

/// The world of a session against `p`, its manifest written: with the provider key or
/// (`keyed` false) with no `inference.api_key`.
fn world(label: &str, p: &KeptProvider, keyed: bool) -> World {
    let w = World::new(label);
    // The scripted mock only stands in for `Spec::new`'s endpoint, replaced by `p`'s.
    let unused = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &unused);
    spec.endpoint = p.endpoint();
    let yaml = spec.yaml();
    let key_line = format!("  api_key: ${{{KEY_VAR}}}\n");
    assert!(yaml.contains(&key_line));
    w.manifest_text(&if keyed { yaml } else { yaml.replace(&key_line, "") });
    w
}

/// A three-turn session against `p` (see [`world`]) with `env`; `requests` model requests
/// expected (a retry is one more).
fn session_with(label: &str, p: &KeptProvider, keyed: bool, requests: usize, env: &[(&str, &str)]) {
    let w = world(label, p, keyed);
    let run = w.run("run true twice", env);
    run.assert_ok();
    assert_eq!(w.result(&run.sid()), "done\n");
    assert_eq!(
        p.authorizations().len(),
        requests,
        "one request per turn, and each retry"
    );
}

fn session(label: &str, p: &KeptProvider, keyed: bool, requests: usize) {
    session_with(label, p, keyed, requests, &[]);
}

#[test]
fn a_sessions_model_calls_go_over_one_kept_connection_each_with_the_key() {
    let p = provider(Mode::Keep);
    session("agent-keepalive", &p, true, 3);
    assert_eq!(p.connections(), 1, "three model calls, one connection");
    let bearer = Some(format!("Bearer {KEY}"));
    assert_eq!(p.authorizations(), vec![bearer.clone(), bearer.clone(), bearer]);
}

#[test]
fn without_a_provider_key_the_calls_share_one_connection_too() {
    let p = provider(Mode::Keep);
    session("agent-keepalive-keyless", &p, false, 3);
    assert_eq!(p.connections(), 1, "three model calls, one connection");
    assert_eq!(p.authorizations(), vec![None, None, None]);
}

#[test]
fn a_provider_that_drops_each_connection_unannounced_gets_a_new_one_per_call() {
    let p = provider(Mode::DropAfterAnswer);
    session("agent-keepalive-dropped", &p, true, 3);
    assert_eq!(p.connections(), 3, "a dropped connection is never reused");
}

#[test]
fn a_connection_whose_call_was_answered_with_an_error_is_not_kept() {
    let p = provider(Mode::FirstBusy);
    session("agent-keepalive-busy", &p, true, 4);
    assert_eq!(
        p.connections(),
        2,
        "the 503's connection closed; the retry and the two calls after it on a new one"
    );
}

#[cfg(feature = "tls")]
/// A CA and a certificate for 127.0.0.1 it signed (`ca.pem`, `server.pem`, `server.key`),
/// and a provider over TLS with them.
fn tls_provider(t: &TempDir) -> KeptProvider {
    common::oci::make_certificate(t.path());
    KeptProvider::start_tls(
        2,
        "bash",
        json!({"command": "true"}),
        Mode::Keep,
        &t.path().join("server.pem"),
        &t.path().join("server.key"),
    )
}

#[cfg(feature = "tls")]
#[test]
fn over_tls_the_endpoint_is_checked_against_the_operators_ca_and_one_handshake_serves_the_session() {
    let t = TempDir::new("keepalive-tls");
    let p = tls_provider(&t);
    assert!(p.endpoint().starts_with("https://"));
    let ca = t.path().join("ca.pem");
    session_with(
        "agent-keepalive-tls",
        &p,
        true,
        3,
        &[("MURMUR_CA_FILE", ca.to_str().unwrap())],
    );
    assert_eq!(p.connections(), 1, "three model calls, one TLS connection");
    let bearer = Some(format!("Bearer {KEY}"));
    assert_eq!(p.authorizations(), vec![bearer.clone(), bearer.clone(), bearer]);
}

#[cfg(feature = "tls")]
#[test]
fn without_the_operators_ca_an_endpoints_certificate_is_refused_and_no_call_is_made() {
    let t = TempDir::new("keepalive-untrusted");
    let p = tls_provider(&t);
    let w = world("agent-keepalive-untrusted", &p, true);
    let run = w.run("run true twice", &[]);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert!(
        run.stderr().contains("TLS with 127.0.0.1 failed"),
        "{}",
        run.both()
    );
    assert!(run.stderr().contains("UnknownIssuer"), "{}", run.both());
    assert_eq!(
        p.authorizations(),
        Vec::<Option<String>>::new(),
        "no request got through"
    );
}
