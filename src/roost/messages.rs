//! Every response text the roost spec fixes, in one place.

/// The one identity refusal, byte-identical on every endpoint.
pub const IDENTITY: &str = "not authorised: this daemon answers only a credential it minted for a running session, and an approval it minted for that same session";
pub const EXPIRED: &str = "this spawn approval has passed its expiry; an approval is valid for 60 seconds from the POST /spawn that granted it";
pub const REPLAYED: &str = "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another";
pub const NOT_FOUND: &str = "not found";
pub const SESSION_NOT_FOUND: &str = "session not found";

pub fn wrong_coordinates(approved: &str, asked: &str) -> String {
    format!("this spawn approval was granted for '{approved}', not '{asked}'")
}

pub fn wrong_bytes(coords: &str, approved: &str, resolved: &str) -> String {
    format!(
        "'{coords}' now resolves to a different artifact than the one this spawn approval was granted for (approved sha256 {approved}, resolved sha256 {resolved})"
    )
}

pub fn not_in_parent_list(name: &str) -> String {
    format!("capsule '{name}' is not in parent's spawn_allow")
}

pub fn not_in_global_list(name: &str) -> String {
    format!("capsule '{name}' is not in --spawn-allow")
}

pub fn depth(max_depth: u32) -> String {
    format!(
        "delegation depth bound reached: this daemon allows {max_depth} levels of delegation below a top-level capsule (--max-depth {max_depth}), and this session has none left to spend — a capsule whose capabilities.spawn.allow names itself terminates here rather than recursing"
    )
}

pub fn concurrency(max: u32, holding: usize) -> String {
    format!(
        "delegation concurrency bound reached: this daemon allows a capsule {max} live children at a time (--max-concurrent {max}), and this session already holds {holding} — wait for one to finish, or raise --max-concurrent"
    )
}

pub fn ceiling(max: u32, holding: usize) -> String {
    format!(
        "machine capsule ceiling reached: this daemon allows {max} live capsules on this host across every formation (--max-live-capsules {max}), and it is already holding {holding} — this is the host's ceiling rather than this capsule's own --max-concurrent, so narrowing the formation does not help; the same request may be granted once other capsules finish"
    )
}

/// The refusal of a top-level registration from another local account that already holds
/// the ceiling (this project's rule; the spec's ceiling never refuses the operator's own).
pub fn account_ceiling(max: u32, holding: usize, operator: u32, account: Option<u32>) -> String {
    let who = match account {
        Some(uid) => format!("uid {uid}"),
        None => "a client whose account the kernel could not name".to_string(),
    };
    format!(
        "account capsule ceiling reached: this daemon, run by uid {operator}, admits at most {max} live capsules from each other local account (--max-live-capsules {max}), and {who} already holds {holding} — the same request may be granted once that account's other capsules finish, or run a mur-roost of your own"
    )
}
