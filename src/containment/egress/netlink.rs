//! The two rtnetlink requests the namespace helper makes inside its new network namespace:
//! bring `lo` up, and add `local default dev lo` (table local), so that every IPv4
//! destination is delivered to a socket inside the namespace. Each request is acknowledged
//! by the kernel; a negative acknowledgement is the error. The namespace helper makes them,
//! and so does a contained child that gets a network namespace of its own.

use rustix::net::{recv, send, socket, AddressFamily, RecvFlags, SendFlags, SocketType};
use std::io;

const NLMSG_ERROR: u16 = 2;
const RTM_NEWLINK: u16 = 16;
const RTM_NEWROUTE: u16 = 24;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
/// `lo` is always interface 1 in a namespace.
const LO_INDEX: u32 = 1;
const IFF_UP: u32 = 0x1;
const RT_TABLE_LOCAL: u8 = 255;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_HOST: u8 = 254;
const RTN_LOCAL: u8 = 2;
const RTA_OIF: u16 = 4;

/// `ip link set lo up` then `ip route add local default dev lo table local`. Allocates
/// nothing (the messages are built on the stack), so a child between clone and exec may
/// make it too.
pub fn loopback_up_with_local_default() -> io::Result<()> {
    let fd = socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    // ifinfomsg: family, pad, type, index, flags, change.
    let mut link = [0u8; 16];
    link[0] = libc::AF_UNSPEC as u8;
    link[4..8].copy_from_slice(&LO_INDEX.to_ne_bytes());
    link[8..12].copy_from_slice(&IFF_UP.to_ne_bytes());
    link[12..16].copy_from_slice(&IFF_UP.to_ne_bytes());
    request(&fd, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, 1, &link)?;
    // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags; then the
    // attribute RTA_OIF = lo.
    let mut route = [0u8; 20];
    route[..8].copy_from_slice(&[
        libc::AF_INET as u8,
        0,
        0,
        0,
        RT_TABLE_LOCAL,
        RTPROT_BOOT,
        RT_SCOPE_HOST,
        RTN_LOCAL,
    ]);
    route[12..14].copy_from_slice(&8u16.to_ne_bytes());
    route[14..16].copy_from_slice(&RTA_OIF.to_ne_bytes());
    route[16..20].copy_from_slice(&LO_INDEX.to_ne_bytes());
    request(
        &fd,
        RTM_NEWROUTE,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        2,
        &route,
    )
}

/// The longest request body sent.
const MAX_BODY: usize = 20;

/// Send one message and read its acknowledgement.
fn request(fd: &std::os::fd::OwnedFd, kind: u16, flags: u16, seq: u32, body: &[u8]) -> io::Result<()> {
    let len = 16 + body.len();
    let mut msg = [0u8; 16 + MAX_BODY];
    let msg = msg
        .get_mut(..len)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EMSGSIZE))?;
    msg[..4].copy_from_slice(&(len as u32).to_ne_bytes());
    msg[4..6].copy_from_slice(&kind.to_ne_bytes());
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    msg[16..].copy_from_slice(body);
    send(fd, msg, SendFlags::empty())?;
    let mut answer = [0u8; 1024];
    let (_, n) = recv(fd, &mut answer[..], RecvFlags::empty())?;
    ack(&answer[..n.min(answer.len())], seq)
}

/// The result an acknowledgement carries: `NLMSG_ERROR` with error 0 is success.
fn ack(a: &[u8], seq: u32) -> io::Result<()> {
    // EPROTO, not a message: the error must not allocate in a child.
    let bad = || io::Error::from_raw_os_error(libc::EPROTO);
    let u16_at = |i: usize| a.get(i..i + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |i: usize| {
        a.get(i..i + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    if u16_at(4).ok_or_else(bad)? != NLMSG_ERROR || u32_at(8).ok_or_else(bad)? != seq {
        return Err(bad());
    }
    match u32_at(16).ok_or_else(bad)? as i32 {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e.saturating_neg())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_are_read_by_sequence_and_error() {
        let mut a = Vec::new();
        a.extend_from_slice(&36u32.to_ne_bytes());
        a.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        a.extend_from_slice(&0u16.to_ne_bytes());
        a.extend_from_slice(&7u32.to_ne_bytes());
        a.extend_from_slice(&0u32.to_ne_bytes());
        a.extend_from_slice(&(-17i32).to_ne_bytes());
        assert_eq!(ack(&a, 7).unwrap_err().raw_os_error(), Some(17));
        assert!(ack(&a, 8).is_err());
        a[16..20].copy_from_slice(&0i32.to_ne_bytes());
        assert!(ack(&a, 7).is_ok());
        assert!(ack(&a[..10], 7).is_err());
    }
}
