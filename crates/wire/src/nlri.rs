//! NLRI fields (RFC 4271 section 4.3, RFC 4760 section 5, Add-Path RFC 7911 section 3):
//! validated once, then iterated lazily without allocating.

use crate::cursor::Cursor;
use crate::types::{Family, Prefix};

/// One NLRI entry: a prefix and, on Add-Path sessions, its path identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nlri {
    pub path_id: Option<u32>,
    pub prefix: Prefix,
}

impl Nlri {
    pub fn new(prefix: Prefix) -> Nlri {
        Nlri {
            path_id: None,
            prefix,
        }
    }
    /// Octets this entry takes on the wire.
    #[inline]
    pub fn wire_len(&self) -> usize {
        1 + self.prefix.wire_octets() + if self.path_id.is_some() { 4 } else { 0 }
    }
    #[inline]
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(id) = self.path_id {
            out.extend_from_slice(&id.to_be_bytes());
        }
        self.prefix.encode(out);
    }
}

/// A syntactically valid run of NLRI of one family, as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NlriView<'a> {
    bytes: &'a [u8],
    family: Family,
    add_path: bool,
    count: u32,
}

impl<'a> NlriView<'a> {
    /// Checks every entry: the length fits the family and the octets are present
    /// (RFC 7606 section 5.3). Returns `None` when the field is syntactically incorrect.
    pub fn parse(bytes: &'a [u8], family: Family, add_path: bool) -> Option<NlriView<'a>> {
        let max = family.max_len();
        let mut c = Cursor::new(bytes);
        let mut count = 0u32;
        while !c.is_empty() {
            if add_path {
                c.u32()?;
            }
            let len = c.u8()?;
            if len > max {
                return None;
            }
            c.take(usize::from(len).div_ceil(8))?;
            count += 1;
        }
        Some(NlriView {
            bytes,
            family,
            add_path,
            count,
        })
    }

    pub fn empty(family: Family) -> NlriView<'static> {
        NlriView {
            bytes: &[],
            family,
            add_path: false,
            count: 0,
        }
    }

    pub fn family(&self) -> Family {
        self.family
    }
    pub fn add_path(&self) -> bool {
        self.add_path
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    #[inline]
    pub fn iter(&self) -> NlriIter<'a> {
        NlriIter {
            c: Cursor::new(self.bytes),
            family: self.family,
            add_path: self.add_path,
        }
    }
}

impl<'a> IntoIterator for NlriView<'a> {
    type Item = Nlri;
    type IntoIter = NlriIter<'a>;
    fn into_iter(self) -> NlriIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &NlriView<'a> {
    type Item = Nlri;
    type IntoIter = NlriIter<'a>;
    fn into_iter(self) -> NlriIter<'a> {
        self.iter()
    }
}

/// Up to four NLRI runs read one after the other (NLRI field and MP attributes); cheaper
/// than nested `chain`/`flatten` adapters on the per-prefix path.
#[derive(Clone, Debug)]
pub struct NlriChain<'a> {
    parts: [NlriIter<'a>; 4],
    at: usize,
}

impl<'a> NlriChain<'a> {
    #[inline]
    pub fn new(parts: [Option<NlriView<'a>>; 4]) -> NlriChain<'a> {
        NlriChain {
            parts: parts.map(|p| p.unwrap_or(NlriView::empty(Family::Ipv4Unicast)).iter()),
            at: 0,
        }
    }
}

impl Iterator for NlriChain<'_> {
    type Item = Nlri;

    #[inline]
    fn next(&mut self) -> Option<Nlri> {
        loop {
            let it = self.parts.get_mut(self.at)?;
            if let Some(n) = it.next() {
                return Some(n);
            }
            self.at += 1;
        }
    }
}

#[derive(Clone, Debug)]
pub struct NlriIter<'a> {
    c: Cursor<'a>,
    family: Family,
    add_path: bool,
}

impl Iterator for NlriIter<'_> {
    type Item = Nlri;

    #[inline]
    fn next(&mut self) -> Option<Nlri> {
        if self.c.is_empty() {
            return None;
        }
        let path_id = if self.add_path {
            Some(self.c.u32()?)
        } else {
            None
        };
        let len = self.c.u8()?;
        let octets = self.c.take(usize::from(len).div_ceil(8))?;
        let prefix = match self.family {
            Family::Ipv4Unicast => {
                let mut a = [0u8; 4];
                a.get_mut(..octets.len())?.copy_from_slice(octets);
                Prefix::V4 {
                    addr: u32::from_be_bytes(a),
                    len,
                }
            }
            Family::Ipv6Unicast => {
                let mut a = [0u8; 16];
                a.get_mut(..octets.len())?.copy_from_slice(octets);
                Prefix::V6 { addr: a, len }
            }
        };
        Some(Nlri { path_id, prefix })
    }
}
