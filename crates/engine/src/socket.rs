//! Socket options a BGP session needs: TCP MD5 signatures (RFC 2385), GTSM (RFC 5082) and
//! the TTL of eBGP, binding before connecting, and listeners.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// `struct tcp_md5sig` of `<linux/tcp.h>`.
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; 80],
}

/// Sets (or with `None` removes) the TCP MD5 key used with `peer` on this socket. On a
/// listener it applies to connections from `peer`, and unsigned SYNs from it are dropped.
pub fn set_md5(fd: &impl AsRawFd, peer: IpAddr, key: Option<&[u8]>) -> io::Result<()> {
    let key = key.unwrap_or(&[]);
    if key.len() > 80 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TCP MD5 keys are at most 80 octets",
        ));
    }
    // SAFETY: an all-zero sockaddr_storage / tcp_md5sig is a valid value of these C types.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    match peer {
        IpAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut sig.addr as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.octets());
        }
        IpAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut sig.addr as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_addr.s6_addr = a.octets();
        }
    }
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    // SAFETY: `sig` is a valid tcp_md5sig and lives across the call; the length is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MD5SIG,
            &sig as *const _ as *const libc::c_void,
            std::mem::size_of::<TcpMd5Sig>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_int(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The outgoing TTL and, with GTSM, the lowest TTL accepted (RFC 5082 section 3: send with
/// 255, accept only 256 - hops and above). Without either, eBGP uses TTL 1 unless multihop.
pub fn set_ttl(
    fd: &impl AsRawFd,
    v6: bool,
    ttl_security: Option<u8>,
    external_single_hop: bool,
) -> io::Result<()> {
    let ttl = match (ttl_security, external_single_hop) {
        (Some(_), _) => 255,
        (None, true) => 1,
        (None, false) => 64,
    };
    let (level, ttl_opt, min_opt) = if v6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_UNICAST_HOPS,
            libc::IPV6_MINHOPCOUNT,
        )
    } else {
        (libc::IPPROTO_IP, libc::IP_TTL, libc::IP_MINTTL)
    };
    set_int(fd, level, ttl_opt, ttl)?;
    if let Some(hops) = ttl_security {
        set_int(fd, level, min_opt, 256 - libc::c_int::from(hops))?;
    }
    Ok(())
}

/// Sets only the outgoing TTL (hop limit).
pub fn set_ttl_value(fd: &impl AsRawFd, v6: bool, ttl: libc::c_int) -> io::Result<()> {
    if v6 {
        set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, ttl)
    } else {
        set_int(fd, libc::IPPROTO_IP, libc::IP_TTL, ttl)
    }
}

/// Options for one outgoing connection.
pub struct ConnectOptions<'a> {
    pub local: Option<IpAddr>,
    pub md5_key: Option<&'a [u8]>,
    pub ttl_security: Option<u8>,
    pub external_single_hop: bool,
}

/// Connects to `peer`, binding to the local address first when one is given.
pub async fn connect(peer: SocketAddr, o: &ConnectOptions<'_>) -> io::Result<TcpStream> {
    let socket = if peer.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(local) = o.local {
        socket.bind(SocketAddr::new(local, 0))?;
    }
    if o.md5_key.is_some() {
        set_md5(&socket, peer.ip(), o.md5_key)?;
    }
    set_ttl(
        &socket,
        peer.is_ipv6(),
        o.ttl_security,
        o.external_single_hop,
    )?;
    let stream = socket.connect(peer).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A listener with SO_REUSEADDR; an IPv6 one is IPv6-only, so `0.0.0.0` and `[::]` can both
/// be listened on.
pub fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    // Keep each connection's SYN: its TTL is the one GTSM can judge before the first
    // message is read ([`prepare_accepted`]).
    set_int(&socket, libc::IPPROTO_TCP, libc::TCP_SAVE_SYN, 1)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// Why an accepted connection is refused before anything is read from it.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// GTSM (RFC 5082 section 3): the neighbor's SYN came with a TTL (hop limit) below
    /// 256 - hops; the connection is dropped without a word.
    #[error("GTSM: its SYN arrived with TTL {ttl}, below the {min} ttl-security allows")]
    TtlTooLow { ttl: u8, min: u8 },
    #[error("cannot set socket options: {0}")]
    Io(#[from] io::Error),
}

/// The TTL options for an accepted connection, set before anything is read from it. With
/// GTSM the minimum TTL set now filters what comes next, but a first message may already
/// be queued: the SYN's TTL, saved by the listener, judges the connection from its start.
pub fn prepare_accepted(
    stream: &TcpStream,
    ttl_security: Option<u8>,
    external_single_hop: bool,
) -> Result<(), AcceptError> {
    let v6 = stream.peer_addr()?.is_ipv6();
    set_ttl(stream, v6, ttl_security, external_single_hop)?;
    // Read for every connection: the kernel holds the saved SYN until it is.
    let syn_ttl = saved_syn_ttl(stream);
    if let (Some(hops), Some(ttl)) = (ttl_security, syn_ttl) {
        let min = 255u8.saturating_sub(hops.saturating_sub(1));
        if ttl < min {
            return Err(AcceptError::TtlTooLow { ttl, min });
        }
    }
    stream.set_nodelay(true)?;
    Ok(())
}

/// The TTL (IPv4) or hop limit (IPv6) of the connection's SYN, from the headers the
/// listener saved (TCP_SAVE_SYN); `None` if none were saved.
fn saved_syn_ttl(stream: &TcpStream) -> Option<u8> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` octets into `buf` and sets `len`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_SAVED_SYN,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let headers = buf.get(..len as usize)?;
    match headers.first()? >> 4 {
        4 => headers.get(8).copied(),
        6 => headers.get(7).copied(),
        _ => None,
    }
}
