//! One conversation with an OCI registry (the distribution specification's API over the
//! crate's one HTTP client): the token flow on a `401`, retries with backoff on `429`, `5xx`
//! and broken connections, redirects to blob storage followed only over HTTPS, bounded
//! answers, and blobs whose bytes are checked against their digest and size as they arrive.
//! Credentials and tokens go only into `authorization` headers, never into an error.

use super::auth::Credentials;
use super::challenge::{self, Challenge};
use super::manifest::{Blob, MANIFEST_TYPE, MAX_MANIFEST_BYTES};
use super::reference::{loopback, Reference};
use crate::diag::{code, Diagnostic};
use crate::http::client::{self, ClientError, ClientResponse, Options, Url};
use crate::http::tls::TlsConfig;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::time::{Duration, Instant};

/// Retries after the first attempt, and the first backoff (doubled each time).
const RETRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);
/// Redirects followed for one blob.
const MAX_REDIRECTS: u32 = 3;
/// Largest answer that is not a blob (errors, tokens, upload sessions).
const MAX_SMALL: usize = 64 * 1024;
/// Blobs larger than this print a progress line.
const PROGRESS_FROM: u64 = 1 << 20;

/// A registry conversation for one repository.
pub struct Session {
    reference: Reference,
    base: Url,
    push: bool,
    credentials: Option<Credentials>,
    tls: Option<TlsConfig>,
    /// The `authorization` value earned by the last challenge.
    auth: Option<String>,
    /// Origins (`scheme://host:port`) of token realms other than the registry's own that
    /// may be sent the operator's credentials: `MURMUR_TOKEN_REALMS`, comma-separated.
    realms: Vec<String>,
    /// Where progress lines go (None: nowhere).
    progress: Option<Box<dyn Write>>,
}

/// An answer, or the error that ends the command.
type Answer = Result<ClientResponse, Diagnostic>;

impl Session {
    /// A session with `reference`'s repository; `push` asks for push rights too.
    pub fn new(
        reference: &Reference,
        push: bool,
        credentials: Option<Credentials>,
        tls: Option<TlsConfig>,
        progress: Option<Box<dyn Write>>,
    ) -> Result<Session, Diagnostic> {
        let base =
            Url::parse_web(&format!("{}/", reference.base)).map_err(|e| remote(reference, e.to_string()))?;
        if base.tls && tls.is_none() {
            return Err(remote(
                reference,
                "no CA bundle to check the registry's certificate",
            ));
        }
        let realms = std::env::var("MURMUR_TOKEN_REALMS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|o| Url::parse_web(&format!("{}/", o.trim().trim_end_matches('/'))).ok())
            .map(|u| origin(&u))
            .collect();
        Ok(Session {
            reference: reference.clone(),
            base,
            push,
            credentials,
            tls,
            auth: None,
            progress,
            realms,
        })
    }

    /// The reference this session talks about, for messages.
    pub fn reference(&self) -> &Reference {
        &self.reference
    }

    fn url(&self, path: &str) -> Url {
        Url {
            path: path.to_string(),
            ..self.base.clone()
        }
    }

    fn opts(&self, max_response: usize, read_timeout: Duration) -> Options {
        Options {
            connect_timeout: Duration::from_secs(10),
            read_timeout,
            max_response,
            tls: self.tls.clone(),
            refuse_loopback: false,
        }
    }

    /// The manifest at `target` (a tag or a digest): its bytes (at most 1 MiB) and digest.
    /// A manifest asked for by digest must hash to it.
    pub fn manifest(&mut self, target: &str) -> Result<(Vec<u8>, String), Diagnostic> {
        let path = format!("/v2/{}/manifests/{target}", self.reference.repository);
        let r = self.exchange(
            "GET",
            &path,
            &[("accept", MANIFEST_TYPE)],
            &[],
            MAX_MANIFEST_BYTES + 4096,
        )?;
        let r = self.expect(r, &[200], &format!("the manifest {target}"))?;
        if r.body.len() > MAX_MANIFEST_BYTES {
            return Err(remote(
                &self.reference,
                format!("the manifest {target} is larger than 1 MiB"),
            ));
        }
        let digest = format!("sha256:{}", crate::registry::sha256_hex(&r.body));
        if target.starts_with("sha256:") && digest != target {
            return Err(integrity(
                &self.reference,
                format!("the manifest asked for as {target} hashes to {digest}"),
            ));
        }
        Ok((r.body, digest))
    }

    /// A blob's bytes, checked against `blob` while they arrive: more bytes than its size
    /// stop the transfer, and size and digest must match at the end.
    pub fn blob(&mut self, blob: &Blob, what: &str) -> Result<Vec<u8>, Diagnostic> {
        self.fetch(blob, what, true)
    }

    /// A blob known by its digest only: `blob.size` is a bound, not its size.
    pub fn blob_within(&mut self, blob: &Blob, what: &str) -> Result<Vec<u8>, Diagnostic> {
        self.fetch(blob, what, false)
    }

    fn fetch(&mut self, blob: &Blob, what: &str, exact: bool) -> Result<Vec<u8>, Diagnostic> {
        let mut url = self.url(&format!(
            "/v2/{}/blobs/{}",
            self.reference.repository, blob.digest
        ));
        let mut redirects = 0;
        let mut attempt = 0;
        let mut authenticated = false;
        loop {
            let same_origin = url.tls == self.base.tls && url.authority() == self.base.authority();
            // The registry's token goes to the registry, never to the storage it redirects to.
            let auth = self.auth.clone().filter(|_| same_origin);
            let mut headers = vec![];
            if let Some(a) = &auth {
                headers.push(("authorization", a.as_str()));
            }
            // A blob arrives at no less than 64 KiB/s, or the transfer is given up.
            let seconds = 30 + blob.size / (64 * 1024);
            let opts = self.opts(MAX_SMALL, Duration::from_secs(seconds));
            let mut sink = Verifier::new(blob, what, exact, self.progress.as_deref_mut());
            let got = client::get_into_from(&url, &headers, &opts, blob.size, &mut sink);
            let r = match got {
                Ok(r) if r.status == 200 => return sink.finish(&self.reference),
                Ok(r) => r,
                Err(e) if transient(&e) && attempt < RETRIES => {
                    attempt += 1;
                    backoff(attempt, None);
                    continue;
                }
                Err(ClientError::TooLarge) => {
                    return Err(integrity(
                        &self.reference,
                        format!(
                            "the {what} blob {} sent more than {} bytes",
                            blob.digest, blob.size
                        ),
                    ))
                }
                Err(e) => return Err(remote(&self.reference, format!("fetching the {what} blob: {e}"))),
            };
            match r.status {
                401 if same_origin && !authenticated => {
                    self.authenticate(&r)?;
                    authenticated = true;
                }
                301 | 302 | 303 | 307 | 308 if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    url = self.redirect(&url, r.header("location"))?;
                }
                429 | 500..=599 if attempt < RETRIES => {
                    attempt += 1;
                    backoff(attempt, r.header("retry-after"));
                }
                _ => {
                    self.expect(r, &[200], &format!("the {what} blob {}", blob.digest))?;
                }
            }
        }
    }

    /// Where a redirect leads: HTTPS anywhere, or the registry's own origin.
    fn redirect(&self, from: &Url, location: Option<&str>) -> Result<Url, Diagnostic> {
        let location = location.ok_or_else(|| remote(&self.reference, "a redirect without a location"))?;
        let to = self.resolve(from, location).ok_or_else(|| {
            remote(
                &self.reference,
                "a redirect to a location that is not an http(s) URL or path",
            )
        })?;
        let same_origin = to.tls == self.base.tls && to.authority() == self.base.authority();
        if !to.tls && !same_origin {
            return Err(remote(
                &self.reference,
                format!(
                    "a redirect to plain HTTP ({}) refused: blobs are followed only over HTTPS",
                    to.authority()
                ),
            ));
        }
        Ok(to)
    }

    /// A `location` header against the URL it answered: an absolute `http(s)://` URL, or a
    /// path (`/…`, never `//host`) checked as strictly as a URL's, in ASCII.
    fn resolve(&self, from: &Url, location: &str) -> Option<Url> {
        if !location.is_ascii() || location.starts_with("//") {
            return None;
        }
        if location.starts_with('/') {
            let scheme = if from.tls { "https" } else { "http" };
            return Url::parse_web(&format!("{scheme}://{}{location}", from.authority())).ok();
        }
        Url::parse_web(location).ok()
    }

    /// Whether the registry holds a blob already (HEAD).
    pub fn has_blob(&mut self, digest: &str) -> Result<bool, Diagnostic> {
        let path = format!("/v2/{}/blobs/{digest}", self.reference.repository);
        let r = self.exchange("HEAD", &path, &[], &[], MAX_SMALL)?;
        match r.status {
            200 => Ok(true),
            404 => Ok(false),
            _ => self
                .expect(r, &[200], &format!("the blob {digest}"))
                .map(|_| false),
        }
    }

    /// Upload a blob in one request (a POST opening the upload, a PUT closing it with the
    /// digest); the registry checks the digest as well.
    pub fn upload(&mut self, digest: &str, bytes: &[u8], what: &str) -> Result<(), Diagnostic> {
        if self.has_blob(digest)? {
            return Ok(());
        }
        let start = format!("/v2/{}/blobs/uploads/", self.reference.repository);
        let r = self.exchange("POST", &start, &[], &[], MAX_SMALL)?;
        let r = self.expect(r, &[202], "opening an upload")?;
        let location = r
            .header("location")
            .ok_or_else(|| remote(&self.reference, "an upload without a location"))?;
        let path = self.same_origin_path(location)?;
        let sep = if path.contains('?') { '&' } else { '?' };
        let path = format!("{path}{sep}digest={}", digest.replace(':', "%3A"));
        if bytes.len() as u64 > PROGRESS_FROM {
            if let Some(p) = self.progress.as_mut() {
                let _ = writeln!(p, "mur: pushing the {what} ({} bytes)", bytes.len());
            }
        }
        let r = self.exchange(
            "PUT",
            &path,
            &[("content-type", "application/octet-stream")],
            bytes,
            MAX_SMALL,
        )?;
        self.expect(r, &[201], &format!("uploading the {what}"))
            .map(|_| ())
    }

    /// Store `text` as the manifest `tag`; the digest the registry filed it under.
    pub fn put_manifest(&mut self, tag: &str, text: &str) -> Result<String, Diagnostic> {
        let path = format!("/v2/{}/manifests/{tag}", self.reference.repository);
        let r = self.exchange(
            "PUT",
            &path,
            &[("content-type", MANIFEST_TYPE)],
            text.as_bytes(),
            MAX_SMALL,
        )?;
        self.expect(r, &[201], &format!("storing the manifest {tag}"))?;
        Ok(format!("sha256:{}", crate::registry::sha256_hex(text.as_bytes())))
    }

    /// The path (and query) of an upload location, which must be the registry's own.
    fn same_origin_path(&self, location: &str) -> Result<String, Diagnostic> {
        let to = self
            .resolve(&self.base, location)
            .ok_or_else(|| remote(&self.reference, "an upload location that is not a URL or path"))?;
        if to.tls != self.base.tls || to.authority() != self.base.authority() {
            return Err(remote(&self.reference, "an upload location on another host"));
        }
        Ok(to.path)
    }

    /// One request to the registry with its authorization; a `401` earns a token once,
    /// and a GET or HEAD meeting `429`, `5xx` or a broken connection is tried again with
    /// backoff. A POST or PUT is sent once: an upload location is spent by its first use.
    fn exchange(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        max: usize,
    ) -> Answer {
        let url = self.url(path);
        let retries = if matches!(method, "GET" | "HEAD") {
            RETRIES
        } else {
            0
        };
        let mut attempt = 0;
        let mut authenticated = false;
        loop {
            let mut all = headers.to_vec();
            let auth = self.auth.clone();
            if let Some(a) = &auth {
                all.push(("authorization", a.as_str()));
            }
            let timeout = Duration::from_secs(60 + body.len() as u64 / (64 * 1024));
            let got = client::request_to(method, &url, &all, body, &self.opts(max, timeout));
            match got {
                Ok(r) if r.status == 401 && !authenticated => {
                    self.authenticate(&r)?;
                    authenticated = true;
                }
                Ok(r) if (r.status == 429 || r.status >= 500) && attempt < retries => {
                    attempt += 1;
                    backoff(attempt, r.header("retry-after"));
                }
                Ok(r) => return Ok(r),
                Err(e) if transient(&e) && attempt < retries => {
                    attempt += 1;
                    backoff(attempt, None);
                }
                Err(e) => return Err(self.failed(method, path, &e)),
            }
        }
    }

    /// Answer a `401`'s challenge: a token from its realm, or Basic credentials.
    fn authenticate(&mut self, r: &ClientResponse) -> Result<(), Diagnostic> {
        let header = r
            .header("www-authenticate")
            .ok_or_else(|| remote(&self.reference, "the registry answered 401 without a challenge"))?;
        let challenge =
            challenge::parse(header).map_err(|e| remote(&self.reference, format!("its challenge: {e}")))?;
        match challenge {
            Challenge::Basic => {
                let c = self.credentials.as_ref().ok_or_else(|| self.no_credentials())?;
                self.auth = Some(c.basic());
                Ok(())
            }
            Challenge::Bearer { realm, service, .. } => {
                let token = self.token(&realm, service.as_deref())?;
                self.auth = Some(format!("Bearer {token}"));
                Ok(())
            }
        }
    }

    fn no_credentials(&self) -> Diagnostic {
        remote(&self.reference, "the registry asks for credentials and none are configured for it")
            .with_hint("log in with docker or podman (~/.docker/config.json) or point REGISTRY_AUTH_FILE at an auth file")
    }

    /// A token from `realm` for this repository (pull, or pull and push), with the
    /// operator's credentials when there are some.
    fn token(&mut self, realm: &str, service: Option<&str>) -> Result<String, Diagnostic> {
        let mut url = Url::parse_web(realm)
            .map_err(|_| remote(&self.reference, "the token realm is not an http(s) URL"))?;
        // Credentials travel in clear only where the registry itself is plain loopback HTTP.
        if !url.tls && (self.base.tls || !loopback(&url.authority())) {
            return Err(remote(
                &self.reference,
                "the token realm is plain HTTP; that is taken only from a registry that is plain HTTP on loopback",
            ));
        }
        let actions = if self.push { "pull,push" } else { "pull" };
        let scope = format!("repository:{}:{actions}", self.reference.repository);
        let mut query = format!("scope={}", percent(&scope));
        if let Some(s) = service {
            query = format!("service={}&{query}", percent(s));
        }
        let sep = if url.path.contains('?') { '&' } else { '?' };
        url.path = format!("{}{sep}{query}", url.path);
        // The operator's credentials go to the registry's own origin, and to a realm on
        // another one only where the operator named it: a registry must not be able to
        // send them anywhere it likes.
        let realm_origin = origin(&url);
        let trusted = realm_origin == origin(&self.base) || self.realms.contains(&realm_origin);
        let basic = self
            .credentials
            .as_ref()
            .filter(|_| trusted)
            .map(Credentials::basic);
        let mut headers = vec![];
        if let Some(b) = &basic {
            headers.push(("authorization", b.as_str()));
        }
        let opts = self.opts(MAX_SMALL, Duration::from_secs(30));
        let r = client::request_to("GET", &url, &headers, &[], &opts)
            .map_err(|e| remote(&self.reference, format!("the token request: {e}")))?;
        if r.status == 401 || r.status == 403 {
            return Err(match basic {
                None if self.credentials.is_some() => remote(
                    &self.reference,
                    format!(
                        "the token realm {realm_origin} is on another origin than the registry and asks for credentials: they are sent there only when MURMUR_TOKEN_REALMS names it"
                    ),
                ),
                None => self.no_credentials(),
                Some(_) => remote(
                    &self.reference,
                    format!("the token realm refused the credentials ({})", r.status),
                ),
            });
        }
        if r.status != 200 {
            return Err(remote(
                &self.reference,
                format!("the token request answered {}", r.status),
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .map_err(|_| remote(&self.reference, "the token answer is not JSON"))?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| remote(&self.reference, "the token answer holds no usable token"))?;
        Ok(token.to_string())
    }

    /// A request that got no answer, with what to do where the cause is a common one: a
    /// plain-HTTP registry asked over TLS, a certificate of the self-signed kind webpki
    /// refuses, one from a CA nobody named.
    fn failed(&self, method: &str, path: &str, e: &ClientError) -> Diagnostic {
        let d = remote(&self.reference, format!("{method} {path}: {e}"));
        let text = e.to_string();
        if text.contains("InvalidContentType") || text.contains("corrupt message") {
            let loopback = loopback(&self.base.authority());
            return d.with_hint(if loopback {
                "the registry answered in plain HTTP, not TLS: name it oci+http:// (taken only for a loopback registry)"
            } else {
                "the registry answered in plain HTTP, not TLS: a registry off this host must serve HTTPS"
            });
        }
        if text.contains("CaUsedAsEndEntity") {
            return d.with_hint("the registry's certificate is a CA certificate serving as its own server certificate (the common self-signed kind), which TLS refuses: make a CA, sign a server certificate for the registry's name with it, serve that, and name the CA in MURMUR_CA_FILE");
        }
        if text.contains("UnknownIssuer") {
            return d.with_hint("the registry's certificate is not signed by a CA this host trusts: name its CA in MURMUR_CA_FILE (a PEM bundle)");
        }
        d
    }

    /// `r` if its status is one of `ok`; else an error naming `what` and the registry's
    /// own error code and message when it sent them.
    fn expect(&self, r: ClientResponse, ok: &[u16], what: &str) -> Answer {
        if ok.contains(&r.status) {
            return Ok(r);
        }
        let said = serde_json::from_slice::<serde_json::Value>(&r.body)
            .ok()
            .and_then(|v| {
                let code = v.pointer("/errors/0/code").and_then(|c| c.as_str()).map(clean)?;
                let message = v
                    .pointer("/errors/0/message")
                    .and_then(|m| m.as_str())
                    .map(clean)
                    .filter(|m| !m.is_empty());
                Some(match message {
                    Some(m) => format!(" ({code}: {m})"),
                    None => format!(" ({code})"),
                })
            })
            .unwrap_or_default();
        let d = remote(
            &self.reference,
            format!("{what}: the registry answered {}{said}", r.status),
        );
        Err(match r.status {
            401 | 403 => d.with_hint("check the credentials in ~/.docker/config.json or REGISTRY_AUTH_FILE"),
            _ => d,
        })
    }
}

/// Whether a failed call may succeed if tried again.
fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Connect(_) => true,
        // A deadline that passed is not tried again: the transfer would start from byte 0.
        // Nor is a certificate the client refused: the same one comes back.
        ClientError::Io(io) => {
            !matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) && !io.to_string().contains("invalid peer certificate")
        }
        ClientError::BadResponse(why) => *why == "connection closed early",
        _ => false,
    }
}

/// Sleep before attempt `n` (1-based): the server's `Retry-After` seconds when it gave a
/// small one, else 250 ms doubled per attempt.
fn backoff(n: u32, retry_after: Option<&str>) {
    let asked = retry_after
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .filter(|d| *d <= MAX_RETRY_AFTER);
    std::thread::sleep(asked.unwrap_or(FIRST_BACKOFF * 2u32.pow(n - 1)));
}

/// A registry's own words, kept printable and short.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(80).collect()
}

/// Percent-encoding of a query value (everything but unreserved characters).
fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn remote(r: &Reference, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code::REG_REMOTE, r.to_text(), message.into())
}

fn integrity(r: &Reference, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code::REG_INTEGRITY, r.to_text(), message.into())
}

/// The sink of a blob: hashes and counts what arrives, keeps it, and reports progress for
/// a large one.
struct Verifier<'a> {
    blob: &'a Blob,
    what: &'a str,
    /// `blob.size` is the size (else only a bound).
    exact: bool,
    hasher: Sha256,
    bytes: Vec<u8>,
    progress: Option<&'a mut dyn Write>,
    last: Instant,
}

impl<'a> Verifier<'a> {
    fn new(
        blob: &'a Blob,
        what: &'a str,
        exact: bool,
        progress: Option<&'a mut (dyn Write + 'static)>,
    ) -> Verifier<'a> {
        let progress = progress
            // A blob known by its digest only may be large too: its lines count bytes alone.
            .filter(|_| !exact || blob.size > PROGRESS_FROM)
            .map(|p| p as &mut dyn Write);
        Verifier {
            blob,
            what,
            exact,
            hasher: Sha256::new(),
            bytes: Vec::new(),
            progress,
            last: Instant::now(),
        }
    }

    fn line(&mut self) {
        let (got, size) = (self.bytes.len() as u64, self.blob.size);
        if got <= PROGRESS_FROM {
            return;
        }
        let of = if self.exact {
            format!(" of {}", size / 1024)
        } else {
            String::new()
        };
        let short = self.blob.digest.get(..19).unwrap_or(&self.blob.digest);
        if let Some(p) = self.progress.as_mut() {
            let _ = writeln!(
                p,
                "mur: pulling the {} {short}: {}{of} KiB",
                self.what,
                got / 1024
            );
        }
    }

    /// The bytes, if they are the blob's size and hash to its digest.
    fn finish(mut self, r: &Reference) -> Result<Vec<u8>, Diagnostic> {
        self.line();
        let got = self.bytes.len() as u64;
        if self.exact && got != self.blob.size {
            return Err(integrity(
                r,
                format!(
                    "the {} blob {} is {got} bytes, its manifest says {}",
                    self.what, self.blob.digest, self.blob.size
                ),
            ));
        }
        let digest = format!("sha256:{:x}", self.hasher.finalize());
        if digest != self.blob.digest {
            return Err(integrity(
                r,
                format!(
                    "the {} blob asked for as {} hashes to {digest}",
                    self.what, self.blob.digest
                ),
            ));
        }
        Ok(self.bytes)
    }
}

impl Write for Verifier<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() as u64 + buf.len() as u64 > self.blob.size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "more bytes than the blob's size",
            ));
        }
        self.hasher.update(buf);
        self.bytes.extend_from_slice(buf);
        if self.progress.is_some() && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            self.line();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `scheme://host:port` of `u`: what decides whether a token realm is the registry's own.
fn origin(u: &Url) -> String {
    format!("{}://{}:{}", if u.tls { "https" } else { "http" }, u.host, u.port)
}
