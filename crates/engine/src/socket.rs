//! Socket options a BGP session needs: TCP MD5 signatures (RFC 2385), the TCP
//! Authentication Option (RFC 5925), GTSM (RFC 5082) and the TTL of eBGP, binding before
//! connecting, and listeners.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A `sockaddr_storage` holding `peer`, as the MD5 and TCP-AO options take it.
fn storage_of(peer: IpAddr) -> libc::sockaddr_storage {
    // SAFETY: an all-zero sockaddr_storage is a valid value of this C type.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match peer {
        IpAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut addr as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.octets());
        }
        IpAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut addr as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_addr.s6_addr = a.octets();
        }
    }
    addr
}

/// `setsockopt(IPPROTO_TCP, name)` with a C struct as the value.
fn set_tcp_struct<T>(fd: &impl AsRawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid T and lives across the call; the length is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

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
    // SAFETY: an all-zero tcp_md5sig is a valid value of this C type.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    sig.addr = storage_of(peer);
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    set_tcp_struct(fd, libc::TCP_MD5SIG, &sig)
}

/// A TCP-AO Master Key Tuple (RFC 5925 section 3.1) for one neighbor: the KeyIDs sent and
/// expected, the MAC algorithm and the secret. Traffic keys are derived by the kernel.
#[derive(Clone, PartialEq, Eq)]
pub struct TcpAoKey {
    /// SendID: the KeyID our segments carry.
    pub send_id: u8,
    /// RecvID: the KeyID the neighbor's segments must carry.
    pub receive_id: u8,
    pub algorithm: AoAlgorithm,
    /// The master key, at most 80 octets (TCP_AO_MAXKEYLEN).
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for TcpAoKey {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpAoKey")
            .field("send_id", &self.send_id)
            .field("receive_id", &self.receive_id)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// The MAC algorithms RFC 5926 requires of every TCP-AO implementation, both with 96-bit
/// MACs; Junos and IOS XR name them the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AoAlgorithm {
    /// HMAC-SHA-1-96 (RFC 5926 section 3.2.1).
    HmacSha1_96,
    /// AES-128-CMAC-96 (RFC 5926 section 3.2.2).
    AesCmac128_96,
}

impl AoAlgorithm {
    const ALL: [AoAlgorithm; 2] = [AoAlgorithm::HmacSha1_96, AoAlgorithm::AesCmac128_96];

    /// The configuration's name for it.
    pub fn name(self) -> &'static str {
        match self {
            AoAlgorithm::HmacSha1_96 => "hmac-sha-1-96",
            AoAlgorithm::AesCmac128_96 => "aes-128-cmac-96",
        }
    }

    pub fn from_name(name: &str) -> Option<AoAlgorithm> {
        AoAlgorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The kernel crypto API's name for it.
    fn kernel_name(self) -> &'static [u8] {
        match self {
            AoAlgorithm::HmacSha1_96 => b"hmac(sha1)",
            AoAlgorithm::AesCmac128_96 => b"cmac(aes128)",
        }
    }
}

/// TCP_AO_ADD_KEY, TCP_AO_DEL_KEY and TCP_AO_INFO of `<linux/tcp.h>` (Linux 6.7).
const TCP_AO_ADD_KEY: libc::c_int = 38;
const TCP_AO_DEL_KEY: libc::c_int = 39;
const TCP_AO_INFO: libc::c_int = 40;

/// `struct tcp_ao_add` of `<linux/tcp.h>`.
#[repr(C, align(8))]
struct TcpAoAdd {
    addr: libc::sockaddr_storage,
    alg_name: [u8; 64],
    ifindex: i32,
    /// Bit 0 `set_current`, bit 1 `set_rnext`, the rest reserved.
    flags: u32,
    reserved2: u16,
    prefix: u8,
    sndid: u8,
    rcvid: u8,
    maclen: u8,
    keyflags: u8,
    keylen: u8,
    key: [u8; 80],
}

/// `struct tcp_ao_del` of `<linux/tcp.h>`.
#[repr(C, align(8))]
struct TcpAoDel {
    addr: libc::sockaddr_storage,
    ifindex: i32,
    flags: u32,
    reserved2: u16,
    prefix: u8,
    sndid: u8,
    rcvid: u8,
    current_key: u8,
    rnext: u8,
    keyflags: u8,
}

/// The kernel has no TCP-AO: a session configured with it is not started rather than run
/// unauthenticated.
#[derive(Debug, thiserror::Error)]
#[error("TCP-AO (RFC 5925) is not available in this kernel (Linux {release}): it needs Linux 6.7 or later built with CONFIG_TCP_AO; use authentication-key (TCP MD5) or another kernel")]
pub struct TcpAoUnsupported {
    pub release: String,
}

/// Whether this kernel offers TCP-AO: asking a fresh socket for its TCP-AO state fails
/// with ENOPROTOOPT only where the option does not exist. Asked once per process.
pub fn tcp_ao_supported() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(probe_tcp_ao)
}

fn probe_tcp_ao() -> bool {
    let Ok(s) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) else {
        return false;
    };
    let mut buf = [0u64; 8];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` octets into `buf` and sets `len`.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_AO_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOPROTOOPT)
}

/// The error for a kernel without TCP-AO, typed so that callers and operators see why.
pub fn tcp_ao_unsupported() -> io::Error {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_string())
        .unwrap_or_else(|_| "unknown release".into());
    io::Error::new(io::ErrorKind::Unsupported, TcpAoUnsupported { release })
}

fn host_prefix(peer: IpAddr) -> u8 {
    if peer.is_ipv4() {
        32
    } else {
        128
    }
}

/// Adds the TCP-AO key for `peer` to this socket. On a socket about to connect it becomes
/// the current key at once; on a listener it applies to
/// connections from `peer`, and SYNs from `peer` without a valid MAC are dropped.
pub fn set_ao(fd: &impl AsRawFd, peer: IpAddr, k: &TcpAoKey, current: bool) -> io::Result<()> {
    if k.secret.is_empty() || k.secret.len() > 80 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TCP-AO keys are 1 to 80 octets",
        ));
    }
    // SAFETY: an all-zero tcp_ao_add is a valid value of this C type.
    let mut add: TcpAoAdd = unsafe { std::mem::zeroed() };
    add.addr = storage_of(peer);
    let name = k.algorithm.kernel_name();
    add.alg_name[..name.len()].copy_from_slice(name);
    add.flags = if current { 0b11 } else { 0 };
    add.prefix = host_prefix(peer);
    add.sndid = k.send_id;
    add.rcvid = k.receive_id;
    // RFC 5926 section 3.1: both algorithms truncate their MAC to 96 bits.
    add.maclen = 12;
    add.keylen = k.secret.len() as u8;
    add.key[..k.secret.len()].copy_from_slice(&k.secret);
    set_tcp_struct(fd, TCP_AO_ADD_KEY, &add).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOPROTOOPT) {
            tcp_ao_unsupported()
        } else {
            e
        }
    })
}

/// Removes the TCP-AO key for `peer` from a listener.
pub fn remove_ao(fd: &impl AsRawFd, peer: IpAddr, k: &TcpAoKey) -> io::Result<()> {
    // SAFETY: an all-zero tcp_ao_del is a valid value of this C type.
    let mut del: TcpAoDel = unsafe { std::mem::zeroed() };
    del.addr = storage_of(peer);
    del.prefix = host_prefix(peer);
    del.sndid = k.send_id;
    del.rcvid = k.receive_id;
    set_tcp_struct(fd, TCP_AO_DEL_KEY, &del)
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
    pub tcp_ao: Option<&'a TcpAoKey>,
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
    if let Some(k) = o.tcp_ao {
        set_ao(&socket, peer.ip(), k, true)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The structures match `<linux/tcp.h>`: the kernel reads them by size.
    #[test]
    fn tcp_ao_structures_have_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<TcpAoAdd>(), 288);
        assert_eq!(std::mem::offset_of!(TcpAoAdd, alg_name), 128);
        assert_eq!(std::mem::offset_of!(TcpAoAdd, flags), 196);
        assert_eq!(std::mem::offset_of!(TcpAoAdd, prefix), 202);
        assert_eq!(std::mem::offset_of!(TcpAoAdd, key), 208);
        assert_eq!(std::mem::size_of::<TcpAoDel>(), 144);
        assert_eq!(std::mem::offset_of!(TcpAoDel, keyflags), 143);
    }

    #[test]
    fn tcp_ao_secrets_stay_out_of_logs() {
        let k = TcpAoKey {
            send_id: 1,
            receive_id: 2,
            algorithm: AoAlgorithm::HmacSha1_96,
            secret: b"hunter2".to_vec(),
        };
        assert!(!format!("{k:?}").contains("hunter2"));
    }
}
