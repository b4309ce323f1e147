//! What the configuration is checked against on this host (its addresses); nothing here
//! changes the host.

use std::net::{IpAddr, UdpSocket};

/// Whether the address is one of this host's: the kernel lets a socket bind only to those
/// (unless `ip_nonlocal_bind` is set, when every address passes).
pub(super) fn is_local(address: IpAddr) -> bool {
    UdpSocket::bind((address, 0)).is_ok()
}
