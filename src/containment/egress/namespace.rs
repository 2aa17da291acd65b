//! The per-session network namespace: one holding only `lo`, up, with the single route
//! `local default dev lo` (every IPv4 destination is delivered locally, so no veth, NAT or
//! netfilter is needed), one TCP listener per allowed port and a UDP socket on port 53 opened
//! inside it. As root, a short-lived thread of `mur` makes it (a thread may unshare its own
//! network namespace; nothing else of the process moves); otherwise a user namespace must own
//! it, which a threaded process cannot make, so a helper child (`mur __netns PORT...`, started
//! by the one spawn function) makes both and hands them, with the sockets, to `mur` over one
//! `SCM_RIGHTS` message, then exits. Either way the descriptors keep the namespace alive for
//! exactly as long as `mur` holds them.

use crate::containment::spawn;
use crate::containment::spawn::Stdio;
use std::io::{IoSlice, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// At most this many descriptors cross in the hand-off: the namespace's two, the UDP
/// socket and one listener per port.
const MAX_FDS: usize = super::policy::MAX_PORTS + 3;

pub use crate::containment::spawn::Join;

/// The namespace made, with its sockets.
pub struct Namespace {
    pub join: Join,
    pub tcp: Vec<(u16, TcpListener)>,
    pub udp: UdpSocket,
}

/// Make the namespace with a listener on each of `ports`. `exe` is the running `mur`. An
/// error is the sentence for E-CAP-005. `MURMUR_PROBE_DENY=netns` (the probe's simulation
/// of a host that refuses) refuses here too.
pub fn create(exe: &Path, ports: &[u16]) -> Result<Namespace, String> {
    if std::env::var("MURMUR_PROBE_DENY").is_ok_and(|s| s.split(',').any(|w| w.trim() == "netns")) {
        return Err("unshare(CLONE_NEWNET): refused (simulated by MURMUR_PROBE_DENY)".into());
    }
    if rustix::process::geteuid().is_root() {
        return in_thread(ports);
    }
    let (ours, theirs) = spawn::socket_pair()?;
    let args: Vec<String> = std::iter::once("__netns".to_string())
        .chain(ports.iter().map(u16::to_string))
        .collect();
    let child = spawn::spawn(spawn::Spawn {
        runtime: true,
        stdout: Stdio::from(theirs),
        stderr: Stdio::piped(),
        ..spawn::Spawn::own_helper(exe, &args)
    });
    let mut child = child.map_err(|d| d.message)?;
    let _ = rustix::net::sockopt::set_socket_timeout(
        &ours,
        rustix::net::sockopt::Timeout::Recv,
        Some(Duration::from_secs(10)),
    );
    let got = receive(&ours, ports);
    let mut why = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = (&mut e).take(4096).read_to_string(&mut why);
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the namespace helper: {e}"))?;
    match got {
        Ok(ns) if status.success() => Ok(ns),
        Ok(_) => Err(format!("the namespace helper failed ({status})")),
        Err(e) if why.trim().is_empty() => Err(e),
        Err(_) => Err(why.trim().to_string()),
    }
}

/// As root: a thread of its own unshares its network namespace and builds it; the process
/// and its other threads stay where they were.
fn in_thread(ports: &[u16]) -> Result<Namespace, String> {
    let ports = ports.to_vec();
    let ns = std::thread::Builder::new()
        .name("netns".into())
        .spawn(move || make(&ports))
        .map_err(|e| format!("cannot start the namespace thread: {e}"))?
        .join()
        .map_err(|_| "the namespace thread panicked".to_string())??;
    ns.nonblocking()?;
    Ok(ns)
}

impl Namespace {
    /// The relay polls the sockets; they were made blocking.
    fn nonblocking(&self) -> Result<(), String> {
        self.udp.set_nonblocking(true).map_err(|e| e.to_string())?;
        for (_, l) in &self.tcp {
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Read the hand-off: a text line `user=<0|1> ports=<p,p,...>` and the descriptors in the
/// order net, [user], udp, one listener per port.
fn receive(sock: &OwnedFd, ports: &[u16]) -> Result<Namespace, String> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut text = [0u8; 256];
    let got = recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut text)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| format!("no hand-off from the namespace helper: {e}"))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(r) = m {
            fds.extend(r);
        }
    }
    let text = String::from_utf8_lossy(&text[..got.bytes.min(text.len())]).into_owned();
    let has_user = text.starts_with("user=1");
    let expected = 2 + usize::from(has_user) + ports.len();
    if got.bytes == 0 || fds.len() != expected || !text.ends_with(&format!("ports={}", joined(ports))) {
        return Err(format!(
            "the namespace helper's hand-off was incomplete ({} descriptors)",
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let mut next = || fds.next().ok_or("the hand-off ended early".to_string());
    let net = next()?;
    let user = if has_user { Some(next()?) } else { None };
    let udp = UdpSocket::from(next()?);
    let mut tcp = Vec::new();
    for p in ports {
        tcp.push((*p, TcpListener::from(next()?)));
    }
    let ns = Namespace {
        join: Join { user, net },
        tcp,
        udp,
    };
    ns.nonblocking()?;
    Ok(ns)
}

fn joined(ports: &[u16]) -> String {
    ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
}

/// `mur __netns PORT...`: the helper's side. Its stdout is the hand-off socket.
pub fn helper_main(args: &[String]) -> i32 {
    match build(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

fn build(args: &[String]) -> Result<(), String> {
    let ports: Vec<u16> = args
        .iter()
        .map(|a| a.parse::<u16>().map_err(|_| format!("not a port: {a}")))
        .collect::<Result<_, _>>()?;
    if ports.len() > super::policy::MAX_PORTS {
        return Err("too many ports".into());
    }
    let ns = make(&ports)?;
    let mut fds: Vec<BorrowedFd<'_>> = vec![ns.join.net.as_fd()];
    if let Some(u) = &ns.join.user {
        fds.push(u.as_fd());
    }
    fds.push(ns.udp.as_fd());
    fds.extend(ns.tcp.iter().map(|(_, l)| l.as_fd()));
    let text = format!(
        "user={} ports={}",
        u8::from(ns.join.user.is_some()),
        joined(&ports)
    );
    send(&fds, text.as_bytes()).map_err(|e| format!("hand-off: {e}"))
}

/// Unshare the calling thread's network namespace (and, unless root, a user namespace
/// owning it, mapping only this user and group) and bring `lo` up with the local default
/// route: the namespace every contained command gets. The probe makes it the same way, so
/// its verdict is this one's. An error names the step.
pub fn enter_own() -> Result<(), String> {
    use crate::containment::child;
    use crate::diag::errno_text;
    // The maps name the ids as they are outside: read before the unshare, after which an
    // unmapped id reads as the overflow user (a map of that is refused).
    let (uid_map, gid_map) = child::own_id_maps();
    let root = rustix::process::geteuid().is_root();
    child::enter_network_namespace().map_err(|e| errno_text("unshare(CLONE_NEWNET)", &e))?;
    if !root {
        child::write_id_maps(&uid_map, &gid_map)
            .map_err(|e| errno_text("the user namespace's id maps", &e))?;
    }
    super::netlink::loopback_up_with_local_default()
        .map_err(|e| errno_text("netlink (lo up, local default route)", &e))
}

/// [`enter_own`], then open the sockets inside. The namespace descriptors are the calling
/// thread's (`/proc/thread-self`), which in a threaded `mur` differ from the process's.
fn make(ports: &[u16]) -> Result<Namespace, String> {
    let root = rustix::process::geteuid().is_root();
    enter_own()?;
    let open_ns = |p: &str| -> Result<OwnedFd, String> {
        std::fs::File::open(p)
            .map(OwnedFd::from)
            .map_err(|e| format!("open {p}: {e}"))
    };
    let net = open_ns("/proc/thread-self/ns/net")?;
    let user = if root {
        None
    } else {
        Some(open_ns("/proc/thread-self/ns/user")?)
    };
    let udp = UdpSocket::bind("0.0.0.0:53").map_err(|e| format!("bind udp 0.0.0.0:53: {e}"))?;
    let mut tcp = Vec::new();
    for p in ports {
        let l = TcpListener::bind(("0.0.0.0", *p)).map_err(|e| format!("bind tcp 0.0.0.0:{p}: {e}"))?;
        tcp.push((*p, l));
    }
    Ok(Namespace {
        join: Join { user, net },
        tcp,
        udp,
    })
}

fn send(fds: &[BorrowedFd<'_>], text: &[u8]) -> std::io::Result<()> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    let out = std::io::stdout();
    let n = sendmsg(
        out.as_fd(),
        &[IoSlice::new(text)],
        &mut control,
        SendFlags::empty(),
    )?;
    if n != text.len() {
        return Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    Ok(())
}
