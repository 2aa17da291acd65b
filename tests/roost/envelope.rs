//! The spawn envelope's `contains(parent, child)`: every axis of the roost spec's table, in
//! both directions, with the refusal sentence in the spec's format.

use murmur::manifest::{contains, parse, Envelope, Resolve};

fn envelope(name: &str, capabilities: &str) -> Envelope {
    let yaml = format!("name: {name}\nversion: 0.1.0\n{capabilities}");
    Envelope::of(&parse(&yaml, Resolve::Nothing).unwrap().manifest)
}

fn refusal(key: &str, entry: &str) -> String {
    format!(
        "{key}: the child declares '{entry}', which its parent does not hold — a spawned capsule can never hold more capability than the capsule that spawned it"
    )
}

/// `parent` contains `child`, and the reverse is refused with `key` and `entry`.
fn one_way(parent: &str, child: &str, key: &str, entry: &str) {
    let (p, c) = (envelope("parent", parent), envelope("child", child));
    assert_eq!(contains(&p, &c), Ok(()), "parent should contain child");
    assert_eq!(
        contains(&c, &p),
        Err(refusal(key, entry)),
        "reverse should be refused"
    );
}

#[test]
fn network_allow() {
    one_way(
        "capabilities: {network: {allow: [example.com, api.example.com]}}\n",
        "capabilities: {network: {allow: ['https://example.com']}}\n",
        "capabilities.network.allow",
        "example.com",
    );
    // The spec's own example: a host the parent does not list at all.
    let p = envelope("p", "capabilities: {network: {allow: [example.com]}}\n");
    let c = envelope("c", "capabilities: {network: {allow: [api.example.com]}}\n");
    assert_eq!(
        contains(&p, &c),
        Err(refusal("capabilities.network.allow", "api.example.com"))
    );
    // `https://h` covers only that exact form: not another port, not plain http.
    let p = envelope("p", "capabilities: {network: {allow: ['https://h.org']}}\n");
    for child in ["'h.org:8443'", "'http://h.org'", "'https://h.org:8443'"] {
        let c = envelope("c", &format!("capabilities: {{network: {{allow: [{child}]}}}}\n"));
        assert!(contains(&p, &c).is_err(), "{child}");
    }
}

#[test]
fn unix_sockets() {
    one_way(
        "capabilities: {network: {unix_sockets: true}}\n",
        "capabilities: {network: {unix_sockets: false}}\n",
        "capabilities.network.unix_sockets",
        "true",
    );
}

#[test]
fn peer_fetch_allow() {
    one_way(
        "capabilities: {peer_fetch: {allow: [localhost]}}\n",
        "capabilities: {peer_fetch: {allow: ['localhost:41234']}}\n",
        "capabilities.peer_fetch.allow",
        "localhost",
    );
}

#[test]
fn shell_allow() {
    one_way(
        "capabilities: {shell: {allow: [git, jq]}}\n",
        "capabilities: {shell: {allow: [git]}}\n",
        "capabilities.shell.allow",
        "jq",
    );
}

#[test]
fn spawn_allow() {
    one_way(
        "capabilities: {spawn: {allow: [worker-a, worker-b]}}\n",
        "capabilities: {spawn: {allow: [worker-b]}}\n",
        "capabilities.spawn.allow",
        "worker-a",
    );
}

#[test]
fn env_allow() {
    one_way(
        "capabilities: {env: {allow: [LANG, TZ]}}\n",
        "capabilities: {env: {allow: [TZ]}}\n",
        "capabilities.env.allow",
        "LANG",
    );
}

#[test]
fn filesystem_scope() {
    // No scope covers anything; a scoped parent refuses a child without a scope.
    one_way(
        "",
        "capabilities: {filesystem: {scope: data}}\n",
        "capabilities.filesystem.scope",
        "the whole workdir",
    );
    // A scope covers itself and beneath it, not a sibling that shares a prefix.
    one_way(
        "capabilities: {filesystem: {scope: data}}\n",
        "capabilities: {filesystem: {scope: data/sub}}\n",
        "capabilities.filesystem.scope",
        "data",
    );
    let p = envelope("p", "capabilities: {filesystem: {scope: data}}\n");
    assert_eq!(contains(&p, &p.clone()), Ok(()));
    let sibling = envelope("c", "capabilities: {filesystem: {scope: database}}\n");
    assert_eq!(
        contains(&p, &sibling),
        Err(refusal("capabilities.filesystem.scope", "database"))
    );
}

#[test]
fn workdir_exec() {
    one_way(
        "capabilities: {filesystem: {workdir_exec: true}}\n",
        "",
        "capabilities.filesystem.workdir_exec",
        "true",
    );
}

#[test]
fn state_stores() {
    // A block without `store` opens a store named after its own capsule.
    let p = envelope("parent", "capabilities: {state: {store: shared}}\nartifacts: [{name: t, version: 1.0.0, capabilities: {state: {}}}]\n");
    assert_eq!(p.state_stores.iter().collect::<Vec<_>>(), ["parent", "shared"]);
    let c = envelope("child", "capabilities: {state: {store: shared}}\n");
    assert_eq!(contains(&p, &c), Ok(()));
    assert_eq!(
        contains(&c, &p),
        Err(refusal("capabilities.state.store", "parent"))
    );
    let own = envelope("child", "capabilities: {state: {}}\n");
    assert_eq!(
        contains(&p, &own),
        Err(refusal("capabilities.state.store", "child"))
    );
}

#[test]
fn containment_floor_may_only_rise() {
    let scoped = envelope("p", "capabilities: {containment: scoped}\n");
    let sealed = envelope("c", "capabilities: {containment: sealed}\n");
    let advisory = envelope("c", "capabilities: {containment: advisory}\n");
    assert_eq!(contains(&scoped, &sealed), Ok(()));
    assert_eq!(contains(&scoped, &scoped.clone()), Ok(()));
    assert_eq!(
        contains(&scoped, &advisory),
        Err("capabilities.containment: the child declares 'advisory', below its parent's floor 'scoped' — a containment floor may only rise from parent to child".to_string())
    );
}

#[test]
fn axes_are_checked_in_the_table_order() {
    let p = envelope("p", "");
    let c = envelope(
        "c",
        "capabilities: {shell: {allow: [git]}, network: {allow: [x.org]}, containment: sealed}\n",
    );
    assert_eq!(
        contains(&p, &c),
        Err(refusal("capabilities.network.allow", "x.org"))
    );
}
