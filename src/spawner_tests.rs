use super::*;

const SES: &str = "ses_0123456789abcdef0123456789abcdef";
const DLG: &str = "dlg_fedcba9876543210fedcba9876543210";

fn good() -> Spawner {
    Spawner {
        url: "http://127.0.0.1:41234".into(),
        session_id: SES.into(),
        context_id: "ctx_7".into(),
        trust: Trust::Untrusted,
        delegation_id: DLG.into(),
    }
}

fn refusal(text: &str) -> String {
    let d = Spawner::from_env(Some(text)).unwrap_err();
    assert_eq!(d.code, "E-RUN-020", "{text}");
    assert_eq!(d.key, "MURMUR_SPAWNER");
    d.message
}

#[test]
fn unset_or_blank_means_nobody_delegated() {
    assert_eq!(Spawner::from_env(None).unwrap(), None);
    assert_eq!(Spawner::from_env(Some("")).unwrap(), None);
    assert_eq!(Spawner::from_env(Some("  \t")).unwrap(), None);
}

#[test]
fn a_rendered_handle_reads_back_in_the_spec_order() {
    let s = good();
    let text = s.to_env();
    assert_eq!(
        text,
        format!(
            r#"{{"url":"http://127.0.0.1:41234","session_id":"{SES}","context_id":"ctx_7","trust":"untrusted","delegation_id":"{DLG}"}}"#
        )
    );
    assert_eq!(Spawner::from_env(Some(&text)).unwrap(), Some(s.clone()));
    let with_slash = text.replace("41234\"", "41234/\"");
    assert_eq!(Spawner::from_env(Some(&with_slash)).unwrap(), Some(s));
}

#[test]
fn the_completion_headers_carry_the_handle() {
    let mut s = good();
    s.trust = Trust::Trusted;
    assert_eq!(
        s.completion_headers(),
        [
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-task-trust", "trusted"),
            ("x-murmur-delegation-id", DLG),
            ("x-murmur-completion-session", SES),
        ]
    );
}

#[test]
fn every_malformed_value_is_e_run_020() {
    let base: Value = serde_json::from_str(&good().to_env()).unwrap();
    let with = |k: &str, v: Value| {
        let mut m = base.clone();
        m[k] = v;
        m.to_string()
    };
    let without = |k: &str| {
        let mut m = base.clone();
        m.as_object_mut().unwrap().remove(k);
        m.to_string()
    };
    assert!(refusal("not json").contains("not a JSON object"));
    assert!(refusal("[1]").contains("not a JSON object"));
    assert!(refusal(&"x".repeat(MAX_LEN + 1)).contains("longer than"));
    assert!(refusal(&with("extra", "1".into())).contains("unknown field"));
    for k in FIELDS {
        assert!(refusal(&without(k)).contains(&format!("{k} is missing")), "{k}");
        assert!(
            refusal(&with(k, "".into())).contains(&format!("{k} is empty")),
            "{k}"
        );
        assert!(
            refusal(&with(k, 7.into())).contains(&format!("{k} is not a string")),
            "{k}"
        );
    }
    for url in [
        "http://10.0.0.1:80",
        "https://127.0.0.1:80",
        "http://127.0.0.1",
        "http://127.0.0.1:0",
        "http://127.0.0.1:65536",
        "http://127.0.0.1:080",
        "http://localhost:1/x",
        "http://user@localhost:1",
        "127.0.0.1:80",
    ] {
        assert!(refusal(&with("url", url.into())).contains("url must be"), "{url}");
    }
    for id in [
        "ses_0123",
        "SES_0123456789abcdef0123456789abcdef",
        &SES.to_uppercase(),
    ] {
        assert!(
            refusal(&with("session_id", id.into())).contains("session_id is not"),
            "{id}"
        );
    }
    assert!(refusal(&with("delegation_id", SES.into())).contains("delegation_id is not"));
    assert!(refusal(&with("trust", "maybe".into())).contains("trust is neither"));
    assert!(refusal(&with("context_id", "a\nb".into())).contains("control character"));
    assert!(refusal(&with("context_id", "c".repeat(257).into())).contains("longer than 256"));
}
