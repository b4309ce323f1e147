//! The few rtnetlink messages ribshard speaks, encoded and decoded here rather than through a
//! general library: route add, replace and delete and nexthop objects are the hot path of
//! a table load (one buffer, many messages, no allocation per route), and nexthop objects
//! (`RTM_NEWNEXTHOP`, Linux 5.3) are not in the maintained crates. Layouts are those of
//! `linux/netlink.h`, `linux/rtnetlink.h` and `linux/nexthop.h`; attributes are aligned to 4
//! octets. Decoding never panics on any input (fuzzed: `fuzz/fuzz_targets/netlink.rs`).

pub mod nexthop;
pub mod route;
pub mod socket;

pub use nexthop::{NexthopMsg, NexthopSpec};
pub use route::{RouteMsg, RouteNext};
pub use socket::{NlError, NlSocket};

// linux/netlink.h
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;

// linux/rtnetlink.h
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_DELADDR: u16 = 21;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_GETROUTE: u16 = 26;
pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
pub const RTM_GETNEXTHOP: u16 = 106;

/// Multicast groups (`enum rtnetlink_groups`).
pub const RTNLGRP_LINK: u32 = 1;
pub const RTNLGRP_IPV4_IFADDR: u32 = 5;
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;
pub const RTNLGRP_IPV6_ROUTE: u32 = 11;
pub const RTNLGRP_NEXTHOP: u32 = 32;

pub const AF_UNSPEC: u8 = 0;
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// The header every netlink message starts with.
pub const HEADER_LEN: usize = 16;

/// `NLA_ALIGN`.
pub fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One message of a received buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    /// The port of the socket whose request caused it (0: the kernel's own doing).
    pub pid: u32,
    pub payload: &'a [u8],
}

impl Message<'_> {
    /// For `NLMSG_ERROR`: the error (negative errno; 0 is an acknowledgement) and the
    /// sequence number of the request it answers.
    pub fn error(&self) -> Option<(i32, u32)> {
        if self.kind != NLMSG_ERROR {
            return None;
        }
        let code = i32::from_ne_bytes(self.payload.get(0..4)?.try_into().ok()?);
        let seq = u32::from_ne_bytes(self.payload.get(12..16)?.try_into().ok()?);
        Some((code, seq))
    }
}

/// The messages of a buffer, in order; stops at the first malformed header.
pub struct Messages<'a> {
    buf: &'a [u8],
}

impl<'a> Messages<'a> {
    pub fn new(buf: &'a [u8]) -> Messages<'a> {
        Messages { buf }
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;
    fn next(&mut self) -> Option<Message<'a>> {
        let h = self.buf.get(..HEADER_LEN)?;
        let u32_at = |i: usize| {
            h.get(i..i + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes)
        };
        let u16_at = |i: usize| {
            h.get(i..i + 2)
                .and_then(|b| b.try_into().ok())
                .map(u16::from_ne_bytes)
        };
        let len = u32_at(0)? as usize;
        if len < HEADER_LEN || len > self.buf.len() {
            self.buf = &[];
            return None;
        }
        let m = Message {
            kind: u16_at(4)?,
            flags: u16_at(6)?,
            seq: u32_at(8)?,
            pid: u32_at(12)?,
            payload: self.buf.get(HEADER_LEN..len)?,
        };
        self.buf = self
            .buf
            .get(align(len).min(self.buf.len())..)
            .unwrap_or(&[]);
        Some(m)
    }
}

/// The attributes (type, value) of a payload, from `offset`; stops at the first malformed
/// one. The type's two top bits (nested, network order) are cleared.
pub struct Attrs<'a> {
    buf: &'a [u8],
}

impl<'a> Attrs<'a> {
    pub fn new(buf: &'a [u8]) -> Attrs<'a> {
        Attrs { buf }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let len = usize::from(u16::from_ne_bytes(self.buf.get(0..2)?.try_into().ok()?));
        let kind = u16::from_ne_bytes(self.buf.get(2..4)?.try_into().ok()?) & 0x3fff;
        if len < 4 || len > self.buf.len() {
            self.buf = &[];
            return None;
        }
        let value = self.buf.get(4..len)?;
        self.buf = self
            .buf
            .get(align(len).min(self.buf.len())..)
            .unwrap_or(&[]);
        Some((kind, value))
    }
}

pub(crate) fn u32_of(v: &[u8]) -> Option<u32> {
    v.get(..4)?.try_into().ok().map(u32::from_ne_bytes)
}

/// Writes messages back to back into one buffer, for one `sendmsg`.
#[derive(Debug, Default)]
pub struct Builder {
    buf: Vec<u8>,
    /// Where the message being written starts.
    open: Option<usize>,
    messages: usize,
}

impl Builder {
    pub fn with_capacity(n: usize) -> Builder {
        Builder {
            buf: Vec::with_capacity(n),
            open: None,
            messages: 0,
        }
    }

    /// Starts a message; `fixed` is its family header (`rtmsg`, `nhmsg`, ...).
    pub fn begin(&mut self, kind: u16, flags: u16, seq: u32, fixed: &[u8]) {
        self.end();
        self.open = Some(self.buf.len());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(fixed);
        self.pad();
    }

    pub fn attr(&mut self, kind: u16, value: &[u8]) {
        let len = 4 + value.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.pad();
    }

    pub fn attr_u32(&mut self, kind: u16, v: u32) {
        self.attr(kind, &v.to_ne_bytes());
    }

    /// Starts a nested attribute (or one built in parts); returns where, for
    /// [`Builder::end_nested`].
    pub fn begin_nested(&mut self, kind: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        at
    }

    pub fn end_nested(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        if let Some(b) = self.buf.get_mut(at..at + 2) {
            b.copy_from_slice(&len.to_ne_bytes());
        }
        self.pad();
    }

    /// Raw octets inside a nested attribute (an `rtnexthop` header).
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// The length so far of what began at `at` (an `rtnexthop`'s own length).
    pub fn since(&self, at: usize) -> usize {
        self.buf.len() - at
    }

    pub fn patch_u16(&mut self, at: usize, v: u16) {
        if let Some(b) = self.buf.get_mut(at..at + 2) {
            b.copy_from_slice(&v.to_ne_bytes());
        }
    }

    pub fn position(&self) -> usize {
        self.buf.len()
    }

    fn pad(&mut self) {
        let n = align(self.buf.len()) - self.buf.len();
        self.buf.extend_from_slice(&[0u8; 3][..n]);
    }

    /// Closes the message being written (its length).
    pub fn end(&mut self) {
        if let Some(at) = self.open.take() {
            let len = (self.buf.len() - at) as u32;
            if let Some(b) = self.buf.get_mut(at..at + 4) {
                b.copy_from_slice(&len.to_ne_bytes());
            }
            self.messages += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Messages written (closed) so far.
    pub fn messages(&self) -> usize {
        self.messages + usize::from(self.open.is_some())
    }

    /// The buffer, every message closed.
    pub fn finish(&mut self) -> &[u8] {
        self.end();
        &self.buf
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.open = None;
        self.messages = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_attributes_round_trip() {
        let mut b = Builder::default();
        b.begin(RTM_NEWROUTE, NLM_F_REQUEST, 7, &[1, 2, 3]);
        b.attr_u32(6, 1234);
        b.attr(1, &[10, 0, 0]);
        b.begin(RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, 8, &[0; 12]);
        let buf = b.finish().to_vec();
        assert_eq!(b.messages(), 2);
        let m: Vec<Message> = Messages::new(&buf).collect();
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].kind, m[0].seq), (RTM_NEWROUTE, 7));
        assert_eq!((m[1].kind, m[1].flags, m[1].seq), (RTM_DELROUTE, 5, 8));
        // The fixed header is padded to 4 octets.
        let attrs: Vec<_> = Attrs::new(&m[0].payload[4..]).collect();
        assert_eq!(
            attrs,
            vec![(6, &1234u32.to_ne_bytes()[..]), (1, &[10, 0, 0][..])]
        );
    }

    #[test]
    fn malformed_input_ends_iteration() {
        assert_eq!(Messages::new(&[1, 2, 3]).count(), 0);
        // A length past the buffer.
        let mut h = 100u32.to_ne_bytes().to_vec();
        h.extend_from_slice(&[0; 12]);
        assert_eq!(Messages::new(&h).count(), 0);
        assert_eq!(Attrs::new(&[2, 0, 1, 0]).count(), 0, "length below 4");
    }
}
