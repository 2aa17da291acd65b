//! The effective grants of a session, as one JSON value (the `session_start` trace event and
//! `--explain-scope --json` print the same object) and as text for people.

use crate::containment::egress;
use crate::manifest::model::{Containment, Manifest};
use serde_json::{json, Value};

pub use crate::containment::host_env::IDENTITY_VARS;

/// What a session grants, computed before anything is staged.
pub struct Scope<'a> {
    pub manifest: &'a Manifest,
    pub declared: Containment,
    pub achieved: Containment,
    /// The preopen as the operator should read it (a path, or a pattern before staging).
    pub preopen: String,
    /// `capabilities.env.allow` names present in the host environment.
    pub env_present: Vec<String>,
    /// What bounds and ends the session's child processes here (`HostReport::bound`), or
    /// why nothing does.
    pub processes: String,
}

/// What the achieved class means for this process, in one line.
pub fn mechanisms(achieved: Containment) -> &'static str {
    match achieved {
        Containment::Advisory => {
            "no kernel mechanism: the WASM guest is bounded by its WASI grants and wasmtime limits only"
        }
        Containment::Scoped => "landlock and seccomp per child process",
        Containment::Sealed => "user, mount, PID and network namespaces with a composed read-only root, landlock and seccomp per child process",
    }
}

impl Scope<'_> {
    /// The effective grants as JSON.
    pub fn grants(&self) -> Value {
        let c = &self.manifest.capabilities;
        let mut env: Vec<String> = self.env_present.clone();
        env.extend(IDENTITY_VARS.iter().map(|s| s.to_string()));
        json!({
            "filesystem": {
                "preopen": self.preopen,
                "guest_path": ".",
                "access": "read-write",
                "workdir_exec": c.workdir_exec,
            },
            "env": env,
            "network": {
                "http_allow": c.network_allow.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                "sockets": false,
                "unix_sockets": c.unix_sockets,
                "subprocess_egress": self.egress(),
            },
            "shell": c.shell_allow.clone().unwrap_or_default(),
            "spawn": c.spawn_allow,
            "limits": {
                "memory_bytes": c.limits.memory_bytes,
                "table_elements": c.limits.table_elements,
                "instances": c.limits.instances,
                "deadline_seconds": c.limits.deadline(),
            },
        })
    }

    /// What a shell command or native tool may reach: by name through the session's egress
    /// relay under `scoped` and `sealed`; nothing is constrained under `advisory`.
    fn egress(&self) -> Value {
        let m = self.manifest;
        let rules = &m.subprocess_rules();
        let enforced = self.achieved >= Containment::Scoped;
        json!({
            "subprocesses": m.subprocess_route(),
            "enforced": enforced,
            "rules": if enforced { egress::policy::Policy::describe(rules) } else { Vec::new() },
            "ports": egress::policy::ports(rules).unwrap_or_default(),
            "dns": if enforced { "the allowed names only (A records, TTL 60 s); every other name REFUSED" } else { "the host's" },
            "ipv6": !enforced,
            "udp": if enforced { "port 53 to the relay's DNS only" } else { "any" },
        })
    }

    /// `--explain-scope --json`.
    pub fn to_json(&self) -> String {
        let v = json!({
            "name": self.manifest.name,
            "version": self.manifest.version,
            "containment": {
                "declared": self.declared.as_str(),
                "achieved": self.achieved.as_str(),
                "floor_met": self.achieved >= self.declared,
                "mechanisms": mechanisms(self.achieved),
                "processes": self.processes,
            },
            "effective_grants": self.grants(),
        });
        format!("{v}\n")
    }

    /// `--explain-scope` for people.
    pub fn to_text(&self) -> String {
        let g = self.grants();
        let list = |v: &Value| -> String {
            let items: Vec<String> = v
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            if items.is_empty() {
                "(none)".into()
            } else {
                items.join(", ")
            }
        };
        let met = if self.achieved >= self.declared {
            ""
        } else {
            "  (floor NOT met: the launch would be refused with E-CAP-003)"
        };
        let l = &g["limits"];
        format!(
            "capsule: {} v{}\n\
             containment: declared {}, achieved {}{met}\n\
             \x20 mechanisms: {}\n\
             \x20 processes: {}\n\
             filesystem: {} as '.', read-write{}\n\
             env: {}\n\
             network: http via the allow-list gate to {}; no sockets\n\
             \x20 subprocesses: {}\n\
             shell: {}\n\
             spawn: {}\n\
             limits: memory {} bytes, table {} elements, {} instances, deadline {} s\n",
            self.manifest.name,
            self.manifest.version,
            self.declared.as_str(),
            self.achieved.as_str(),
            mechanisms(self.achieved),
            self.processes,
            self.preopen,
            if self.manifest.capabilities.workdir_exec {
                ", workdir_exec"
            } else {
                ""
            },
            list(&g["env"]),
            list(&g["network"]["http_allow"]),
            subprocess_network(&g["network"]["subprocess_egress"]),
            list(&g["shell"]),
            list(&g["spawn"]),
            l["memory_bytes"],
            l["table_elements"],
            l["instances"],
            l["deadline_seconds"],
        )
    }
}

/// The text line for a session's subprocess egress.
fn subprocess_network(e: &Value) -> String {
    if e["subprocesses"] != true {
        return "none (no shell.allow or tool artifact)".into();
    }
    if e["enforced"] != true {
        return "NOT constrained (containment is advisory)".into();
    }
    let rules: Vec<&str> = e["rules"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if rules.is_empty() {
        return "no destination (empty capabilities.network.allow); DNS answers REFUSED".into();
    }
    format!(
        "by name through the session's egress relay to {}; DNS answers only those names; IPv4 only, no UDP but DNS",
        rules.join("; ")
    )
}
