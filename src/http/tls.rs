//! The client's transport: a plain TCP connection or TLS over one (rustls with the ring
//! provider, the stack wasmtime-wasi-http already brings), with the roots the caller trusts
//! (a PEM CA bundle). Only `https://` URLs go through TLS; the server's name is checked
//! against its certificate by webpki. Built without the `tls` feature (`mur-roost`, which
//! speaks only plain HTTP on loopback) no configuration can be made: an `https://` URL is
//! then refused as a client without TLS refuses it.

use std::io::{self, Read, Write};
use std::net::TcpStream;
#[cfg(feature = "tls")]
use std::sync::Arc;

/// A client TLS configuration, built once per process from a CA bundle.
#[cfg(feature = "tls")]
pub type TlsConfig = Arc<rustls::ClientConfig>;

/// Without the `tls` feature there is no configuration: this type has no value.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub enum TlsConfig {}

/// Without the `tls` feature: refused.
#[cfg(not(feature = "tls"))]
pub fn config_from_pem(_pem: &[u8]) -> Result<TlsConfig, String> {
    Err("this build has no TLS (built without the tls feature)".into())
}

/// The largest CA bundle read.
pub const MAX_CA_FILE: u64 = 4 << 20;

/// Why no configuration came of the host's CA bundles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaError {
    /// A bundle was read but cannot be used: `PATH: why`.
    Bundle(String),
    /// The bundle the operator named (`MURMUR_CA_FILE`) cannot be read: `PATH: why`.
    Named(String),
    /// None of the candidates can be read.
    Missing,
}

/// The configuration of the first of `candidates` (`places::ca_files`: `MURMUR_CA_FILE`
/// alone when set, else the system's bundles) that `read` reads, for `mur push`/`pull` and
/// for a push notification's `https://` webhook alike. With `named` (the operator named the
/// bundle) its read failing is the answer, never a reason to look further.
pub fn config_from_ca_files(
    candidates: &[std::path::PathBuf],
    named: bool,
    read: impl Fn(&std::path::Path) -> io::Result<Vec<u8>>,
) -> Result<TlsConfig, CaError> {
    for path in candidates {
        match read(path) {
            Ok(pem) => {
                return config_from_pem(&pem).map_err(|e| CaError::Bundle(format!("{}: {e}", path.display())))
            }
            Err(e) if named => return Err(CaError::Named(format!("{}: {e}", path.display()))),
            Err(_) => continue,
        }
    }
    Err(CaError::Missing)
}

/// The operator's trust, as every `https` client of `mur` takes it (registries, webhooks,
/// a driver's endpoint): `MURMUR_CA_FILE` alone when set, its failure the answer, else the
/// first of the system's bundles (`places::ca_files`) that `read` reads.
pub fn operator_config(read: impl Fn(&std::path::Path) -> io::Result<Vec<u8>>) -> Result<TlsConfig, CaError> {
    let named = std::env::var_os("MURMUR_CA_FILE").is_some_and(|v| !v.is_empty());
    config_from_ca_files(&crate::places::ca_files(), named, read)
}

/// A configuration trusting the certificates of the PEM bundle `pem` (and nothing else).
/// A bundle with no certificate in it is an error: it would trust nobody, silently.
#[cfg(feature = "tls")]
pub fn config_from_pem(pem: &[u8]) -> Result<TlsConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("the CA bundle is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("a certificate of the CA bundle is refused: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the CA bundle holds no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One connection of the client.
pub enum Conn {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    /// Start TLS with `host` (a DNS name or an IP literal, brackets removed) over `tcp`. The
    /// handshake itself runs on the first write, under the caller's timeouts.
    #[cfg(feature = "tls")]
    pub fn tls(tcp: TcpStream, host: &str, config: &TlsConfig) -> io::Result<Conn> {
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?;
        let conn = rustls::ClientConnection::new(config.clone(), name)
            .map_err(|e| io::Error::other(format!("TLS setup: {e}")))?;
        Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(conn, tcp))))
    }

    /// Without the `tls` feature no configuration exists to call this with.
    #[cfg(not(feature = "tls"))]
    pub fn tls(_tcp: TcpStream, _host: &str, config: &TlsConfig) -> io::Result<Conn> {
        match *config {}
    }

    /// The TCP connection under it (for timeouts).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            #[cfg(feature = "tls")]
            Conn::Tls(s) => &s.sock,
        }
    }

    /// The plain TCP connection, or None for TLS.
    pub fn into_plain(self) -> Option<TcpStream> {
        match self {
            Conn::Plain(s) => Some(s),
            #[cfg(feature = "tls")]
            Conn::Tls(_) => None,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            // A TLS peer that closes without close_notify is an error (rustls says
            // UnexpectedEof), never the end of a body read to the close: that would let
            // whoever can reset the TCP connection cut a body short.
            #[cfg(feature = "tls")]
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// The first readable bundle is the answer; a named one's read failure too; none is Missing.
    #[test]
    fn the_first_readable_bundle_answers_and_a_named_one_is_never_passed_over() {
        let paths = [PathBuf::from("/gone.pem"), PathBuf::from("/empty.pem")];
        let read = |p: &Path| match p.to_str() {
            Some("/empty.pem") => Ok(b"no certificate here\n".to_vec()),
            _ => Err(io::Error::from(io::ErrorKind::NotFound)),
        };
        let Err(CaError::Bundle(why)) = config_from_ca_files(&paths, false, read) else {
            panic!("an unusable bundle is its own error");
        };
        assert!(why.starts_with("/empty.pem: "), "{why}");
        let Err(CaError::Named(why)) = config_from_ca_files(&paths[..1], true, read) else {
            panic!("a named bundle's read failure is the answer");
        };
        assert!(why.starts_with("/gone.pem: "), "{why}");
        assert!(matches!(
            config_from_ca_files(&paths[..1], false, read),
            Err(CaError::Missing)
        ));
    }
}
