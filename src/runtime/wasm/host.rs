//! What a guest's store holds: its WASI context (exactly the manifest's grants), the HTTP
//! gate, the tool registry, and the resource limiter.

use super::credential::{self, Credential, Endpoint, Observer};
use super::keepalive::{self, Sent};
use crate::manifest::model::Limits;
use crate::manifest::netrule::NetRule;
use crate::runtime::gate;
use std::path::Path;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::cli::OutputFile;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

wasmtime::component::bindgen!({
    path: "wit",
    world: "murmur:capsule/capsule",
    // Driven as a future so a guest blocked in a host call can be cut off at its deadline.
    exports: { default: async },
});

pub use exports::murmur::capsule::run::Guest as RunExport;
use murmur::tool::run::{ToolInput, ToolResult};

/// A grow or count past `capabilities.limits`: the limiter's trap, told apart from any other.
#[derive(Debug)]
pub struct LimitExceeded(pub String);

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitExceeded {}

/// At most this many linear memories per store: one for a plain component's core module,
/// a few for composed ones. Without a cap, a multi-memory component multiplies its budget.
pub const MAX_MEMORIES: usize = 8;
/// At most this many tables per store.
pub const MAX_TABLES: usize = 32;

/// At most this many host resources (streams, pollables, descriptors, HTTP objects) live
/// at once per guest (wasmtime's default is a million).
pub const MAX_RESOURCES: usize = 4096;
/// At most this many bytes in one set of HTTP header fields (wasmtime-wasi-http's default is
/// 128 KiB): with [`MAX_RESOURCES`], host memory a guest can pin through fields stays
/// under 64 MiB.
pub const MAX_FIELDS_BYTES: usize = 16 << 10;

/// Caps from `capabilities.limits`, counted across every memory and table of the store:
/// `memory_bytes` bounds the sum of all memories, `table_elements` the sum of all tables.
pub struct Limiter {
    memory_bytes: usize,
    table_elements: usize,
    instances: usize,
    /// Bytes granted so far, over all memories.
    memory_used: usize,
    /// Elements granted so far, over all tables.
    table_used: usize,
}

impl Limiter {
    pub fn new(l: &Limits) -> Limiter {
        let cap = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Limiter {
            memory_bytes: cap(l.memory_bytes),
            table_elements: cap(l.table_elements),
            instances: cap(l.instances),
            memory_used: 0,
            table_used: 0,
        }
    }

    /// The total after growing one item from `current` to `desired`, when within `cap`.
    fn grow(used: usize, current: usize, desired: usize, cap: usize) -> Option<usize> {
        let total = used.saturating_sub(current).saturating_add(desired);
        (total <= cap).then_some(total)
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> Result<bool> {
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        match Limiter::grow(self.memory_used, current, desired, self.memory_bytes) {
            Some(total) => {
                self.memory_used = total;
                Ok(true)
            }
            None => Err(wasmtime::Error::new(LimitExceeded(format!(
                "memory limit: the guest's memories would total {} bytes, capabilities.limits.memory_bytes is {}",
                self.memory_used.saturating_sub(current).saturating_add(desired),
                self.memory_bytes
            )))),
        }
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> Result<bool> {
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        match Limiter::grow(self.table_used, current, desired, self.table_elements) {
            Some(total) => {
                self.table_used = total;
                Ok(true)
            }
            None => Err(wasmtime::Error::new(LimitExceeded(format!(
                "table limit: the guest's tables would total {} elements, capabilities.limits.table_elements is {}",
                self.table_used.saturating_sub(current).saturating_add(desired),
                self.table_elements
            )))),
        }
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// The gate, as wasmtime-wasi-http's hooks: refused requests never leave the process; a
/// request to the inference endpoint gets the provider credential and its outcome observed.
pub struct Gate {
    rules: Vec<NetRule>,
    credential: Option<std::sync::Arc<Credential>>,
    /// A driver's `inference.endpoint`: its well-framed requests there go over kept
    /// connections (`keepalive`), shared by no other guest.
    endpoint: Option<std::sync::Arc<Endpoint>>,
    observer: Option<Observer>,
}

impl WasiHttpHooks for Gate {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn std::future::Future<Output = std::result::Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn std::future::Future<
                Output = std::result::Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<
                            dyn std::future::Future<
                                    Output = std::result::Result<(), wasmtime_wasi_http::Error>,
                                > + Send,
                        >,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        let uri = request.uri();
        let uri_host = uri.host().map(str::to_string);
        let uri_authority = uri.authority().map(|a| a.as_str().to_string());
        let verdict = gate::check_authority(uri.authority().map_or("", |a| a.as_str())).and_then(|_| {
            gate::check(
                &self.rules,
                uri.scheme_str().unwrap_or(""),
                uri.host().unwrap_or(""),
                uri.port_u16(),
            )
        });
        if verdict.is_err() {
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let mut request = request;
        let to_endpoint = self.credential.as_ref().is_some_and(|c| c.matches(request.uri()));
        if let (true, Some(c)) = (to_endpoint, &self.credential) {
            c.attach(request.headers_mut());
        }
        // A driver's well-framed call to its endpoint goes over a kept connection
        // (`keepalive`); `fut` (the guest's end of the response body) needs nothing from us,
        // as in wasmtime-wasi-http's own client. Anything else gets a connection of its own.
        let kept =
            self.endpoint.as_ref().is_some_and(|e| e.matches(request.uri())) && keepalive::framed(&request);
        let sent: Box<
            dyn std::future::Future<Output = std::result::Result<Sent, wasmtime_wasi_http::Error>> + Send,
        > = if kept {
            drop(fut);
            let lane = self.credential.as_ref().map(|c| c.lane());
            Box::new(keepalive::keeper().send(request, options, lane))
        } else {
            wasmtime_wasi_http::default_hooks().send_request(request, options, fut)
        };
        if !to_endpoint {
            return sent;
        }
        let observer = self.observer.clone();
        let credential = self.credential.clone();
        let (host, authority) = (uri_host.unwrap_or_default(), uri_authority.unwrap_or_default());
        Box::new(async move {
            let mut r = Box::into_pin(sent).await;
            if let (Ok((resp, _)), Some(c)) = (&mut r, &credential) {
                c.scrub(resp.headers_mut());
            }
            if let Some(observer) = &observer {
                match &r {
                    Ok((resp, _)) => credential::observe(
                        observer,
                        Ok((resp.status().as_u16(), resp.headers().get("retry-after"))),
                    ),
                    Err(e) => credential::observe(observer, Err(credential::failure(&host, &authority, e))),
                }
            }
            r
        })
    }
}

/// Everything one guest's store owns.
pub struct Host {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    gate: Gate,
    pub limiter: Limiter,
}

/// The grants a guest gets.
pub struct Grants<'a> {
    pub preopen: Option<&'a Path>,
    /// A hook's own records directory, preopened as `/records` (hooks granted `records: own`).
    pub records: Option<&'a Path>,
    pub env: &'a [(String, String)],
    pub network_allow: &'a [NetRule],
    pub limits: &'a Limits,
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
    /// The provider key and the one origin it goes to (drivers only).
    pub credential: Option<std::sync::Arc<Credential>>,
    /// Where the endpoint's answers are recorded (drivers only).
    pub observer: Option<Observer>,
    /// The endpoint whose requests go over kept connections (drivers only).
    pub endpoint: Option<std::sync::Arc<Endpoint>>,
}

impl Host {
    /// Exactly `grants`: one preopen `.` (none when `preopen` is `None`), a hook's records
    /// directory as `/records` when granted, the listed environment, no sockets, no stdin.
    pub fn new(grants: Grants<'_>) -> Result<Host> {
        let mut b = WasiCtxBuilder::new();
        if let Some(dir) = grants.preopen {
            b.preopened_dir(dir, ".", FsPerms::ReadWrite)?;
        }
        if let Some(dir) = grants.records {
            b.preopened_dir(dir, "/records", FsPerms::ReadWrite)?;
        }
        for (k, v) in grants.env {
            b.env(k, v);
        }
        b.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        b.stdout(OutputFile::new(grants.stdout));
        b.stderr(OutputFile::new(grants.stderr));
        // Host-side objects a guest creates (streams, pollables, HTTP fields) are not in its
        // linear memory, so `memory_bytes` does not see them: cap their number and size.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_FIELDS_BYTES);
        Ok(Host {
            wasi: b.build(),
            http,
            table,
            gate: Gate {
                rules: grants.network_allow.to_vec(),
                credential: grants.credential,
                observer: grants.observer,
                endpoint: grants.endpoint,
            },
            limiter: Limiter::new(grants.limits),
        })
    }
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Host {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.gate,
        }
    }
}

/// `murmur:tool/run` comes along with the types the registry uses; a capsule calling it
/// directly gets an error result, not a trap.
impl murmur::tool::run::Host for Host {
    fn run(&mut self, _input: ToolInput) -> ToolResult {
        ToolResult {
            status: murmur::tool::run::Status::Error,
            summary: Some("murmur:tool/run is not callable from a capsule; use murmur:tool-registry".into()),
            data: None,
            data_path: None,
            truncated: false,
            metadata: Vec::new(),
        }
    }
}

impl murmur::tool_registry::invoke::Host for Host {
    /// A script capsule has no tools yet: every name is unknown, answered as an error.
    fn invoke(&mut self, name: String, _input: ToolInput) -> std::result::Result<ToolResult, String> {
        let shown: String = name.chars().take(100).filter(|c| !c.is_control()).collect();
        Err(format!("unknown tool '{shown}': this capsule declares no tools"))
    }
}

/// A linker with WASI preview 2, wasi:http behind the gate, and the tool registry.
pub fn linker(engine: &wasmtime::Engine) -> Result<wasmtime::component::Linker<Host>> {
    let mut linker = wasmtime::component::Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Capsule::add_to_linker::<Host, wasmtime::component::HasSelf<Host>>(&mut linker, |h| h)?;
    Ok(linker)
}
