//! Which destinations a contained subprocess may reach: the ports `capabilities.network.allow`
//! implies, the names the DNS answerer may resolve, and the decision for one connection's
//! original destination (an address our DNS handed out for an allowed name, kept for a
//! bounded time, or an address in the launch-time resolution of an allowed rule, with the
//! rule's port).

use crate::manifest::netrule::NetRule;
use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// The most listening ports one session may imply.
pub const MAX_PORTS: usize = 16;
/// How long an address handed out by our DNS stays bound to its name.
pub const BINDING_TTL: Duration = Duration::from_secs(300);
/// The TTL our DNS answers carry.
pub const ANSWER_TTL: u32 = 60;
/// At most this many addresses are bound at once (the oldest go first).
const MAX_BINDINGS: usize = 4096;

/// The ports a rule implies: its own, or 80 and 443 for a bare host.
fn rule_ports(r: &NetRule) -> Vec<u16> {
    match r.port {
        Some(p) => vec![p],
        None => vec![80, 443],
    }
}

/// An IPv4 literal rule's address.
fn literal(r: &NetRule) -> Option<Ipv4Addr> {
    r.host.parse().ok()
}

/// Every port the rules imply, sorted; an error naming the count past [`MAX_PORTS`].
pub fn ports(rules: &[NetRule]) -> Result<Vec<u16>, String> {
    let set: BTreeSet<u16> = rules
        .iter()
        .filter(|r| !r.host.starts_with('['))
        .flat_map(rule_ports)
        .collect();
    if set.len() > MAX_PORTS {
        return Err(format!(
            "capabilities.network.allow implies {} ports; a session listens on at most {MAX_PORTS}",
            set.len()
        ));
    }
    Ok(set.into_iter().collect())
}

/// The allowed host names (not literals), lowercased.
pub fn names(rules: &[NetRule]) -> Vec<String> {
    let set: BTreeSet<String> = rules
        .iter()
        .filter(|r| literal(r).is_none() && !r.host.starts_with('['))
        .map(|r| r.host.clone())
        .collect();
    set.into_iter().collect()
}

/// At most this many addresses of one name are answered and bound.
pub const MAX_ANSWERS: usize = 16;

/// What a name's answer may stand for, fixed at launch: whether the operator chose the
/// resolver, and the host's own interface addresses.
#[derive(Debug, Clone, Default)]
pub struct Stand {
    pub trusted_resolver: bool,
    /// The addresses configured on the host's interfaces (read at launch).
    pub host: Vec<Ipv4Addr>,
}

impl Stand {
    /// Whether `addr` may stand for `name`, so that a spoofed, poisoned or hostile answer
    /// for an allowed name cannot point a child at the host itself or at what only the host
    /// should reach: "this network" (0/8), link-local (where cloud metadata services live),
    /// shared address space (100.64.0.0/10, where some clouds put theirs), the IETF protocol
    /// block (192.0.0.0/24), multicast, reserved and broadcast addresses, and any address
    /// of the host's own interfaces never do; loopback does only for `localhost` (and
    /// `*.localhost`) or when the operator named the resolver. A literal rule is never
    /// filtered.
    pub fn may_stand_for(&self, name: &str, addr: Ipv4Addr) -> bool {
        let o = addr.octets();
        let shared = o[0] == 100 && o[1] & 0xc0 == 64;
        let protocol = o[..3] == [192, 0, 0];
        if o[0] == 0 || addr.is_link_local() || addr.is_multicast() || o[0] >= 240 || shared || protocol {
            return false;
        }
        if addr.is_loopback() {
            return name == "localhost" || name.ends_with(".localhost") || self.trusted_resolver;
        }
        !self.host.contains(&addr)
    }

    /// The addresses of a lookup of `name` that may stand for it, at most [`MAX_ANSWERS`].
    pub fn usable(&self, name: &str, addrs: &[Ipv4Addr]) -> Vec<Ipv4Addr> {
        addrs
            .iter()
            .copied()
            .filter(|a| self.may_stand_for(name, *a))
            .take(MAX_ANSWERS)
            .collect()
    }
}

/// The IPv4 addresses configured on this host's interfaces (the `LOCAL` /32 entries of
/// `/proc/net/fib_trie`), loopback included; empty when it cannot be read.
pub fn host_addresses() -> Vec<Ipv4Addr> {
    std::fs::read_to_string("/proc/net/fib_trie")
        .map(|t| local_addresses(&t))
        .unwrap_or_default()
}

/// The addresses a fib_trie listing marks `/32 host LOCAL` (the line after the address).
fn local_addresses(trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in trie.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("|-- ") {
            last = a.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(a) = last.take() {
                if !found.contains(&a) {
                    found.push(a);
                }
            }
        }
    }
    found
}

/// Why a destination was refused.
pub const NOT_ALLOWED: &str = "not in capabilities.network.allow";
/// Why a port was refused for an allowed host.
pub const PORT_NOT_ALLOWED: &str = "port not allowed for this host";

/// The decisions' state: rules, launch-time resolution, live DNS bindings.
pub struct Policy {
    rules: Vec<NetRule>,
    /// Address → the names it resolved to at launch.
    launch: HashMap<Ipv4Addr, BTreeSet<String>>,
    /// Address → names our DNS handed it out for, each with when the binding lapses.
    bound: HashMap<Ipv4Addr, Vec<(String, Instant)>>,
}

impl Policy {
    /// `launch` is each allowed name's launch-time resolution.
    pub fn new(rules: &[NetRule], launch: &[(String, Vec<Ipv4Addr>)]) -> Policy {
        let mut by_addr: HashMap<Ipv4Addr, BTreeSet<String>> = HashMap::new();
        for (name, addrs) in launch {
            for a in addrs {
                by_addr.entry(*a).or_default().insert(name.clone());
            }
        }
        Policy {
            rules: rules.to_vec(),
            launch: by_addr,
            bound: HashMap::new(),
        }
    }

    /// Whether our DNS may resolve `name` (an allowed host name, lowercased).
    pub fn name_allowed(&self, name: &str) -> bool {
        self.rules.iter().any(|r| r.host == name && literal(r).is_none())
    }

    /// How many distinct names our DNS may resolve (every name [`Policy::name_allowed`]
    /// takes).
    pub fn name_count(&self) -> usize {
        let names: BTreeSet<&str> = self
            .rules
            .iter()
            .filter(|r| literal(r).is_none())
            .map(|r| r.host.as_str())
            .collect();
        names.len()
    }

    /// Whether some rule for `host` allows `port`.
    fn port_ok(&self, host: &str, port: u16) -> bool {
        self.rules
            .iter()
            .any(|r| r.host == host && rule_ports(r).contains(&port))
    }

    /// Remember that our DNS answered `name` with `addrs`.
    pub fn bind(&mut self, name: &str, addrs: &[Ipv4Addr], now: Instant) {
        if self.bound.len() + addrs.len() > MAX_BINDINGS {
            self.bound.retain(|_, v| v.iter().any(|(_, until)| *until > now));
        }
        for a in addrs {
            if self.bound.len() >= MAX_BINDINGS && !self.bound.contains_key(a) {
                break;
            }
            let v = self.bound.entry(*a).or_default();
            v.retain(|(n, until)| n != name && *until > now);
            v.push((name.to_string(), now + BINDING_TTL));
        }
    }

    /// The decision for a connection whose original destination is `addr:port`: the name
    /// it is allowed under (or the literal address), or why it is refused.
    pub fn decide(&self, addr: Ipv4Addr, port: u16, now: Instant) -> Result<String, &'static str> {
        let mut host_known = false;
        let bound = self
            .bound
            .get(&addr)
            .into_iter()
            .flatten()
            .filter(|(_, until)| *until > now)
            .map(|(n, _)| n.as_str());
        let launch = self.launch.get(&addr).into_iter().flatten().map(String::as_str);
        let text = addr.to_string();
        for name in bound.chain(launch).chain(std::iter::once(text.as_str())) {
            if self.rules.iter().any(|r| r.host == name) {
                host_known = true;
                if self.port_ok(name, port) {
                    return Ok(name.to_string());
                }
            }
        }
        Err(if host_known { PORT_NOT_ALLOWED } else { NOT_ALLOWED })
    }

    /// The effective rules, one line each, for `--explain-scope`.
    pub fn describe(rules: &[NetRule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| {
                if r.host.starts_with('[') {
                    format!("{}: never (IPv6 is not routed; IPv4 only)", r.host)
                } else {
                    let ports: Vec<String> = rule_ports(r).iter().map(u16::to_string).collect();
                    format!("{} port {}", r.host, ports.join(", "))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stand(trusted_resolver: bool) -> Stand {
        Stand {
            trusted_resolver,
            host: Vec::new(),
        }
    }

    #[test]
    fn the_host_its_shared_space_and_the_protocol_block_never_stand_for_a_name() {
        let s = Stand {
            trusted_resolver: true,
            host: vec![Ipv4Addr::new(10, 0, 2, 15), Ipv4Addr::new(172, 17, 0, 1)],
        };
        for a in [
            Ipv4Addr::new(10, 0, 2, 15),
            Ipv4Addr::new(172, 17, 0, 1),
            Ipv4Addr::new(100, 64, 0, 1),
            Ipv4Addr::new(100, 100, 100, 200),
            Ipv4Addr::new(100, 127, 255, 254),
            Ipv4Addr::new(192, 0, 0, 192),
        ] {
            assert!(!s.may_stand_for("api.example.com", a), "{a}");
        }
        for a in [
            Ipv4Addr::new(10, 0, 2, 16),
            Ipv4Addr::new(100, 63, 255, 255),
            Ipv4Addr::new(100, 128, 0, 1),
            Ipv4Addr::new(192, 0, 1, 1),
        ] {
            assert!(s.may_stand_for("api.example.com", a), "{a}");
        }
    }

    #[test]
    fn the_host_addresses_are_the_local_entries_of_the_fib_trie() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 10.0.2.0/24 2 0 2\n        |-- 10.0.2.0\n           /24 link UNICAST\n        |-- 10.0.2.15\n           /32 host LOCAL\n        |-- 10.0.2.255\n           /32 link BROADCAST\n     +-- 127.0.0.0/8 2 0 2\n        |-- 127.0.0.1\n           /32 host LOCAL\nLocal:\n        |-- 10.0.2.15\n           /32 host LOCAL\n";
        assert_eq!(
            local_addresses(trie),
            vec![Ipv4Addr::new(10, 0, 2, 15), Ipv4Addr::LOCALHOST]
        );
        assert!(local_addresses("|-- not an address\n/32 host LOCAL\n").is_empty());
    }

    fn rules(list: &[&str]) -> Vec<NetRule> {
        list.iter().map(|s| NetRule::parse(s).unwrap()).collect()
    }

    #[test]
    fn ports_follow_the_rules_and_are_capped() {
        let r = rules(&[
            "api.example.com",
            "https://b.example",
            "c.example:8080",
            "10.0.0.1:22",
        ]);
        assert_eq!(ports(&r).unwrap(), vec![22, 80, 443, 8080]);
        let many: Vec<String> = (1..=17).map(|p| format!("h:{p}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(ports(&rules(&many)).unwrap_err().contains("17 ports"));
        assert_eq!(names(&r), vec!["api.example.com", "b.example", "c.example"]);
    }

    #[test]
    fn an_address_is_allowed_only_through_a_name_or_a_literal_with_its_port() {
        let now = Instant::now();
        let r = rules(&["localhost:8080", "other.test:9000", "10.1.2.3:22"]);
        let lo = Ipv4Addr::LOCALHOST;
        let mut p = Policy::new(&r, &[("localhost".into(), vec![lo])]);
        assert_eq!(p.decide(lo, 8080, now).unwrap(), "localhost");
        assert_eq!(p.decide(lo, 9000, now), Err(PORT_NOT_ALLOWED));
        assert_eq!(p.decide(Ipv4Addr::new(127, 0, 0, 2), 8080, now), Err(NOT_ALLOWED));
        assert_eq!(p.decide(Ipv4Addr::new(10, 1, 2, 3), 22, now).unwrap(), "10.1.2.3");
        assert_eq!(
            p.decide(Ipv4Addr::new(10, 1, 2, 3), 80, now),
            Err(PORT_NOT_ALLOWED)
        );
        let other = Ipv4Addr::new(127, 0, 0, 9);
        assert_eq!(p.decide(other, 9000, now), Err(NOT_ALLOWED));
        p.bind("other.test", &[other], now);
        assert_eq!(p.decide(other, 9000, now).unwrap(), "other.test");
        assert_eq!(p.decide(other, 9000, now + BINDING_TTL), Err(NOT_ALLOWED));
        assert!(p.name_allowed("other.test") && !p.name_allowed("10.1.2.3") && !p.name_allowed("x.test"));
    }

    #[test]
    fn special_addresses_stand_only_for_localhost_or_under_the_operators_resolver() {
        let meta = Ipv4Addr::new(169, 254, 169, 254);
        let lo = Ipv4Addr::LOCALHOST;
        let public = Ipv4Addr::new(93, 184, 216, 34);
        let private = Ipv4Addr::new(10, 1, 2, 3);
        assert!(!stand(false).may_stand_for("api.example.com", meta));
        assert!(!stand(false).may_stand_for("api.example.com", lo));
        assert!(!stand(false).may_stand_for("api.example.com", Ipv4Addr::UNSPECIFIED));
        assert!(!stand(false).may_stand_for("api.example.com", Ipv4Addr::BROADCAST));
        assert!(!stand(false).may_stand_for("api.example.com", Ipv4Addr::new(224, 0, 0, 1)));
        assert!(stand(false).may_stand_for("api.example.com", public));
        assert!(stand(false).may_stand_for("api.example.com", private));
        assert!(stand(false).may_stand_for("localhost", lo));
        assert!(stand(false).may_stand_for("db.localhost", lo));
        assert!(stand(true).may_stand_for("api.example.com", lo));
        assert!(!stand(true).may_stand_for("api.example.com", meta));
        assert!(!stand(false).may_stand_for("localhost", meta));
        let many: Vec<Ipv4Addr> = (0..40).map(|i| Ipv4Addr::new(93, 184, 0, i)).collect();
        assert_eq!(stand(false).usable("a.test", &many).len(), MAX_ANSWERS);
        assert_eq!(stand(false).usable("a.test", &[lo, public]), vec![public]);
    }

    #[test]
    fn bindings_stay_bounded() {
        let now = Instant::now();
        let mut p = Policy::new(&rules(&["a.test"]), &[]);
        for i in 0..(MAX_BINDINGS as u32 + 100) {
            p.bind("a.test", &[Ipv4Addr::from(i)], now);
        }
        assert!(p.bound.len() <= MAX_BINDINGS);
    }
}
