//! Which local account opened a loopback TCP connection. TCP has no `SO_PEERCRED`, so the
//! kernel's socket table is asked, through `NETLINK_SOCK_DIAG`, for the one socket whose
//! ends are the connection's ends seen from the other side: the client's socket, whose
//! owner is the uid that made it. The netlink socket is opened once (before a daemon
//! confines itself); each question is one `send` and one `recv`, answered by the kernel
//! within the `send`.

use rustix::net::{netlink, recv, send, socket, AddressFamily, RecvFlags, SendFlags, SocketType};
use std::cell::Cell;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
/// `struct nlmsghdr`.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then the socket id.
const REQUEST: usize = 8 + SOCKET_ID;
/// `struct inet_diag_sockid`: ports, two 16-byte addresses, interface, cookie.
const SOCKET_ID: usize = 48;
/// In `struct inet_diag_msg`, after the header: family, state, timer, retrans (4), the
/// socket id (48), expires, rqueue, wqueue (12), then `idiag_uid`.
const UID_AT: usize = HEADER + 4 + SOCKET_ID + 12;
/// Messages of other (earlier, abandoned) questions skipped before giving up.
const MAX_STALE: usize = 8;
/// `idiag_state` values of sockets no process owns any more, which the kernel reports as
/// uid 0: `TCP_TIME_WAIT` (where a client that closed early ends up) and
/// `TCP_NEW_SYN_RECV`. Their uid is never believed.
const TCP_TIME_WAIT: u8 = 6;
const TCP_NEW_SYN_RECV: u8 = 12;

/// The daemon's line to the kernel's socket table.
pub struct PeerAccounts {
    fd: OwnedFd,
    seq: Cell<u32>,
}

impl PeerAccounts {
    /// Open the netlink socket (no privilege needed).
    pub fn open() -> io::Result<PeerAccounts> {
        let fd = socket(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            Some(netlink::SOCK_DIAG),
        )?;
        Ok(PeerAccounts {
            fd,
            seq: Cell::new(0),
        })
    }

    /// The uid that owns the client end of the TCP connection from `peer` to `local` (our
    /// accepted socket's two ends). `ENOENT` when no process holds that socket any more
    /// (the client closed): then nobody can be named.
    pub fn owner(&self, peer: SocketAddr, local: SocketAddr) -> io::Result<u32> {
        let seq = self.seq.get().wrapping_add(1);
        self.seq.set(seq);
        send(&self.fd, &question(peer, local, seq), SendFlags::empty())?;
        let mut answer = [0u8; 512];
        for _ in 0..MAX_STALE {
            let (n, _) = recv(&self.fd, &mut answer[..], RecvFlags::DONTWAIT)?;
            if let Some(result) = read_answer(&answer[..n.min(answer.len())], seq) {
                return result;
            }
        }
        Err(io::Error::from_raw_os_error(libc::EPROTO))
    }
}

/// The request for the socket bound to `peer` and connected to `local` (the client's).
fn question(peer: SocketAddr, local: SocketAddr, seq: u32) -> [u8; HEADER + REQUEST] {
    let mut m = [0u8; HEADER + REQUEST];
    m[..4].copy_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    let v4 = peer.is_ipv4() && local.is_ipv4();
    m[16] = if v4 { libc::AF_INET } else { libc::AF_INET6 } as u8;
    m[17] = libc::IPPROTO_TCP as u8;
    // Every state: the lookup is by the socket's ends.
    m[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    let id = &mut m[24..];
    id[0..2].copy_from_slice(&peer.port().to_be_bytes());
    id[2..4].copy_from_slice(&local.port().to_be_bytes());
    put_address(&mut id[4..20], peer.ip(), v4);
    put_address(&mut id[20..36], local.ip(), v4);
    // No cookie: INET_DIAG_NOCOOKIE in both words.
    id[40..48].copy_from_slice(&[0xff; 8]);
    m
}

/// An address as `inet_diag_sockid` holds it: four bytes for IPv4, else sixteen (an IPv4
/// address mapped).
fn put_address(out: &mut [u8], ip: IpAddr, v4: bool) {
    match (ip, v4) {
        (IpAddr::V4(a), true) => out[..4].copy_from_slice(&a.octets()),
        (IpAddr::V4(a), false) => out.copy_from_slice(&a.to_ipv6_mapped().octets()),
        (IpAddr::V6(a), _) => out.copy_from_slice(&Ipv6Addr::octets(&a)),
    }
}

/// The uid in an answer to question `seq`, its error, or `None` for a message that answers
/// another question.
fn read_answer(a: &[u8], seq: u32) -> Option<io::Result<u32>> {
    let bad = || io::Error::from_raw_os_error(libc::EPROTO);
    let u16_at = |i: usize| a.get(i..i + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |i: usize| {
        a.get(i..i + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(kind), Some(got)) = (u16_at(4), u32_at(8)) else {
        return Some(Err(bad()));
    };
    if got != seq {
        return None;
    }
    Some(match kind {
        SOCK_DIAG_BY_FAMILY => match a.get(HEADER + 1) {
            Some(&TCP_TIME_WAIT | &TCP_NEW_SYN_RECV) => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            _ => u32_at(UID_AT).ok_or_else(bad),
        },
        NLMSG_ERROR => match u32_at(HEADER).map(|e| e as i32) {
            Some(e) if e < 0 => Err(io::Error::from_raw_os_error(e.saturating_neg())),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_client_end_of_a_loopback_connection_is_owned_by_this_process_user() {
        // Only a kernel built without sock_diag may refuse the socket; then the roost says so
        // at start and counts every client as its own.
        let accounts = match PeerAccounts::open() {
            Ok(a) => a,
            Err(e) => {
                let missing = matches!(e.raw_os_error(), Some(libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT));
                assert!(missing, "NETLINK_SOCK_DIAG refused: {e}");
                return;
            }
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let local = accepted.local_addr().unwrap();
        let uid = rustix::process::getuid().as_raw();
        assert_eq!(accounts.owner(peer, local).unwrap(), uid);
        assert_eq!(accounts.owner(peer, local).unwrap(), uid, "a second question");
        drop(_client);
        drop(accepted);
        // The client closed first: its socket waits in TIME_WAIT, which the kernel reports
        // as uid 0, and which must name nobody.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let gone = accounts.owner(peer, local);
        assert!(gone.is_err(), "{gone:?}");
    }

    #[test]
    fn answers_are_read_by_sequence_and_bounds() {
        let mut a = vec![0u8; UID_AT + 4];
        a[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        a[8..12].copy_from_slice(&5u32.to_ne_bytes());
        a[UID_AT..].copy_from_slice(&4242u32.to_ne_bytes());
        assert_eq!(read_answer(&a, 5).unwrap().unwrap(), 4242);
        assert!(read_answer(&a, 6).is_none(), "another question's answer");
        a[HEADER + 1] = TCP_TIME_WAIT;
        assert!(
            read_answer(&a, 5).unwrap().is_err(),
            "a closed client reads as uid 0"
        );
        a[HEADER + 1] = 1;
        assert!(read_answer(&a[..UID_AT], 5).unwrap().is_err(), "short");
        assert!(read_answer(&a[..6], 5).unwrap().is_err(), "no header");
        a[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        a[16..20].copy_from_slice(&(-2i32).to_ne_bytes());
        assert_eq!(read_answer(&a, 5).unwrap().unwrap_err().raw_os_error(), Some(2));
    }
}
