//! `mur exec` and a capsule's shell tool start their children under the one child policy:
//! for the same manifest they give the same environment, `HOME`, egress decisions and
//! confinement, under `scoped` and `sealed`. The probe is one bash line run both ways: by
//! the model's tool call in an agent session, then by `mur exec` in the same workdir.

use crate::common;

use common::agent::{assert_floor_refusal, host_backs, Drv, Spec, World, KEY, KEY_VAR};
use common::capsule::MUR;
use common::provider::{tool_results, Provider, Step};
use serde_json::json;
use std::net::TcpListener;
use std::process::{Command, Stdio};

/// What the probe prints: the environment (less the two identity values that differ by
/// launch), `HOME`, whether a host file outside the grants can be read and a file written
/// beside the workdir, and whether the inference endpoint and an allowed port can be
/// reached.
fn probe(endpoint_port: u16, allowed_port: u16) -> String {
    format!(
        "env | grep -v -e '^MURMUR_SESSION_ID=' -e '^MURMUR_CAPSULE_URL=' | sort; \
         echo \"home=$HOME\"; \
         (read -r x < /etc/hostname) 2>/dev/null && echo host-file=read || echo host-file=refused; \
         (echo x > ../parity-outside) 2>/dev/null && echo outside=written || echo outside=refused; \
         (exec 3<>/dev/tcp/127.0.0.1/{endpoint_port}) 2>/dev/null && echo endpoint=open || echo endpoint=closed; \
         (exec 3<>/dev/tcp/127.0.0.1/{allowed_port}) 2>/dev/null && echo allowed=open || echo allowed=closed"
    )
}

/// The stdout of one shell tool result (between `--- stdout ---` and `--- stderr ---`).
fn stdout_of(result: &str) -> String {
    let after = result
        .split("--- stdout ---\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{result}"));
    after.split("--- stderr ---").next().unwrap().to_string()
}

fn parity(class: &str) {
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed_port = allowed.local_addr().unwrap().port();
    // Accept and drop whatever reaches the allowed port.
    std::thread::spawn(move || for _ in allowed.incoming() {});
    let w = World::new(&format!("parity-{class}"));
    let p = Provider::start(vec![]);
    let line = probe(p.port(), allowed_port);
    p.push(Step::tool("c1", "bash", json!({ "command": line })));
    p.push(Step::text("probed"));
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.containment = Some(class.into());
    spec.shell = ["bash", "env", "grep", "sort"].map(String::from).to_vec();
    spec.network = vec![format!("127.0.0.1:{allowed_port}")];
    spec.env_allow = vec!["PARITY_SETTING".into(), KEY_VAR.into()];
    w.manifest(&spec);
    let run = w.run("probe", &[("PARITY_SETTING", "shared")]);
    if !host_backs(class) {
        assert_floor_refusal(&run);
        return;
    }
    run.assert_ok();
    let reqs = p.model_requests();
    let by_tool = stdout_of(&tool_results(&reqs[1])[0]);

    let workdir = w.workdir(&run.sid());
    let out = Command::new(MUR)
        .args(["exec", "--manifest"])
        .arg(w.dir.join("murmur.yaml"))
        .arg("--workdir")
        .arg(&workdir)
        .args(["--containment", class, "--", "bash", "-c", &line])
        .env(KEY_VAR, KEY)
        .env("PARITY_SETTING", "shared")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let by_exec = String::from_utf8_lossy(&out.stdout).into_owned();

    assert_eq!(by_exec, by_tool, "{class}: mur exec and the shell tool differ");
    // The shared policy is the one the capsule's tools always had.
    let home = format!(
        "home={}/.home",
        std::fs::canonicalize(&workdir).unwrap().display()
    );
    assert!(by_tool.lines().any(|l| l == home), "{by_tool}");
    assert!(by_tool.contains("PARITY_SETTING=shared\n"), "{by_tool}");
    assert!(!by_tool.contains(KEY), "{by_tool}");
    assert!(by_tool.contains("host-file=refused\n"), "{by_tool}");
    // Beside the workdir: refused under `scoped`; under `sealed` the workdir's parent is
    // the composed root's own tmpfs, so a write there lands nowhere on the host.
    assert!(
        !workdir.parent().unwrap().join("parity-outside").exists(),
        "{by_tool}"
    );
    assert!(
        by_tool.contains("endpoint=closed\n"),
        "the inference endpoint is the driver's: {by_tool}"
    );
    assert!(by_tool.contains("allowed=open\n"), "{by_tool}");
}

#[test]
fn exec_and_the_shell_tool_share_one_policy_under_scoped() {
    parity("scoped");
}

#[test]
fn exec_and_the_shell_tool_share_one_policy_under_sealed() {
    parity("sealed");
}
