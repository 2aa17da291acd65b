//! The A2A door's JSON-RPC layer on arbitrary bytes: the first byte picks the `A2A-Version`
//! header, the rest is the request body. Invariants: nothing panics; an error is a valid
//! JSON-RPC error response with one of the listed codes (and id null for -32700); a parsed
//! call renders, in its own generation, without panicking and as valid JSON; a send's file
//! and data parts land under names that are single safe path components (no dot first),
//! distinct, and render back as file artifacts and a Message answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::a2a::parts::{land_names, Kind};
use murmur::a2a::rpc::{parse_call, result_response, to_body, Op, CODES, PARSE_ERROR};
use murmur::a2a::shapes::{
    render_answer_message, render_artifact_update, render_list, render_send_result, render_status_update,
    render_task, Artifact, Carried, Msg, OutPart, Role, State, Task, RESPONSE_ARTIFACT,
};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let version = match sel % 4 {
        0 => None,
        1 => Some("1.0"),
        2 => Some("0.3"),
        _ => Some("1.0.0"),
    };
    match parse_call(body, version) {
        Err(e) => {
            assert!(CODES.contains(&e.code), "code {}", e.code);
            let v: Value = serde_json::from_slice(&to_body(&e.to_json())).expect("valid JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            assert!(v["id"].is_string() || v["id"].is_number() || v["id"].is_null());
            assert_eq!(v["error"]["code"], e.code);
            assert!(v["error"]["message"].is_string());
            if e.code == PARSE_ERROR {
                assert!(v["id"].is_null());
            }
        }
        Ok(c) => {
            let gen = c.generation;
            let mut files = Vec::new();
            if let Op::Send(s) | Op::Stream(s) = &c.op {
                let parts: Vec<_> = s.parts.iter().filter(|p| p.kind != Kind::Text).cloned().collect();
                let names = land_names(&parts);
                assert_eq!(names.len(), parts.len());
                for (i, n) in names.iter().enumerate() {
                    assert_eq!(murmur::fsx::split(n).map(|c| c.len()).ok(), Some(1), "{n:?}");
                    assert!(!n.starts_with('.') && !names[..i].contains(n), "{n:?}");
                }
                for (p, n) in parts.into_iter().zip(names) {
                    files.push(Artifact {
                        artifact_id: format!("art_{n}"),
                        name: n.clone(),
                        text: String::new(),
                        part: Some(OutPart {
                            name: n,
                            media_type: p.media_type.unwrap_or_default(),
                            carried: match p.kind {
                                Kind::Data => {
                                    Carried::Data(serde_json::from_slice(&p.bytes).unwrap_or_default())
                                }
                                _ => Carried::Bytes(p.bytes),
                            },
                        }),
                    });
                }
            }
            let (text, ctx, hl) = match &c.op {
                Op::Send(s) | Op::Stream(s) => (s.text.clone(), s.context_id.clone(), s.history_length),
                Op::Get(t) | Op::Cancel(t) | Op::Subscribe(t) => (t.id.clone(), None, t.history_length),
                Op::List(l) => (String::new(), l.context_id.clone(), l.history_length),
                Op::ExtendedCard => (String::new(), None, None),
                Op::Push(op) => {
                    if let murmur::a2a::push::Op::Set { config, .. } = op {
                        let secrets = [
                            config.token.as_deref(),
                            config.auth.as_ref().and_then(|a| a.credentials.as_deref()),
                        ];
                        for s in secrets.into_iter().flatten() {
                            assert!(!s.contains(['\r', '\n']), "{s:?}");
                        }
                    }
                    (op.task_id().to_string(), None, None)
                }
            };
            let mut task = Task {
                id: "tsk_f".into(),
                context_id: ctx.unwrap_or_else(|| "ctx_f".into()),
                state: State::Completed,
                status_message: None,
                artifacts: vec![Artifact {
                    artifact_id: "art_f".into(),
                    name: RESPONSE_ARTIFACT.into(),
                    text: text.clone(),
                    part: None,
                }],
                history: vec![Msg {
                    message_id: "m".into(),
                    role: Role::User,
                    text,
                }],
                created_ms: u64::from(sel) << 40,
                updated_ms: u64::MAX >> (sel % 64),
            };
            task.artifacts.extend(files);
            let results = [
                render_answer_message(&task, gen),
                render_send_result(&task, gen, hl),
                render_task(&task, gen, hl),
                render_status_update(&task, gen),
                render_artifact_update(&task, &task.artifacts[0], gen),
                render_list(&[&task], hl, true, "", 50, 1),
            ];
            for r in results {
                let b = to_body(&result_response(&c.id, r));
                let v: Value = serde_json::from_slice(&b).expect("valid JSON");
                assert_eq!(v["id"].is_null(), c.id.is_null());
                assert!(v["result"].is_object());
            }
        }
    }
});
