//! The common actions applied to attribute bytes directly: local-preference, metric,
//! origin and community set / add / delete change one attribute each, and an import policy
//! that tags every route it accepts would otherwise decode, change and encode every received
//! set (most of a policy's cost on a full table, in allocations). The bytes built here are
//! exactly those [`Chain::apply`] followed by encoding would give — attribute order, flags
//! and length forms included — so that interning keys do not depend on the path taken; a
//! property test holds the two to that. Anything else (prepends, next hop, the route server's
//! control communities, a malformed attribute) is left to [`Chain::apply`].

use crate::community::{Community, CommunitySet};
use crate::eval::{Chain, Item, Modify, NumOp, Verdict};
use ribshard_wire::attr;
use ribshard_wire::update::RawAttrIter;
use smallvec::SmallVec;
use std::sync::Arc;

/// What [`Chain::apply_raw`] changed that the caller keeps where the protocol would drop it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawApplied {
    pub local_pref_set: bool,
    pub med_set: bool,
}

/// Values of one attribute: inline up to four (a route's few communities, or one number),
/// so that an edit allocates nothing but the new set.
type Values<T> = SmallVec<[T; 4]>;

/// One attribute the actions may change, as the decoded model would hold it.
struct Slot<T> {
    code: u8,
    /// The attribute's flags while the model holds it (`None`: absent).
    flags: Option<u8>,
    changed: bool,
    value: Values<T>,
}

impl<T: PartialEq + Copy> Slot<T> {
    fn new(code: u8) -> Slot<T> {
        Slot {
            code,
            flags: None,
            changed: false,
            value: Values::new(),
        }
    }

    /// `PathAttributes::set` of the value as it now is: the flags stay when present, else
    /// the type's own (with Extended Length if the value needs it then).
    fn set(&mut self, octets_each: usize) {
        if self.flags.is_none() {
            let long = self.value.len() * octets_each > 255;
            self.flags = Some(
                attr::expected_flags(self.code).unwrap_or(0)
                    | if long {
                        attr::flags::EXTENDED_LENGTH
                    } else {
                        0
                    },
            );
        }
        self.changed = true;
    }

    fn remove(&mut self) {
        self.flags = None;
        self.value.clear();
        self.changed = true;
    }
}

/// Reads fixed-size items of an attribute value; `None` when the length does not divide.
fn items<T, const N: usize>(v: &[u8], f: fn([u8; N]) -> T) -> Option<Values<T>> {
    if v.len() % N != 0 {
        return None;
    }
    Some(
        v.chunks_exact(N)
            .filter_map(|c| <[u8; N]>::try_from(c).ok().map(f))
            .collect(),
    )
}

fn large(b: [u8; 12]) -> [u32; 3] {
    let w = |i: usize| {
        let mut x = [0u8; 4];
        x.copy_from_slice(b.get(i..i + 4).unwrap_or(&[0; 4]));
        u32::from_be_bytes(x)
    };
    [w(0), w(4), w(8)]
}

/// The received attributes' state under the actions, as `eval::modify` changes the model.
struct Edit {
    local_pref: Slot<u32>,
    med: Slot<u32>,
    origin: Slot<u8>,
    standard: Slot<u32>,
    extended: Slot<[u8; 8]>,
    large: Slot<[u32; 3]>,
}

impl Edit {
    fn of(raw: &[u8]) -> Option<Edit> {
        let mut e = Edit {
            local_pref: Slot::new(attr::LOCAL_PREF),
            med: Slot::new(attr::MULTI_EXIT_DISC),
            origin: Slot::new(attr::ORIGIN),
            standard: Slot::new(attr::COMMUNITIES),
            extended: Slot::new(attr::EXTENDED_COMMUNITIES),
            large: Slot::new(attr::LARGE_COMMUNITY),
        };
        let mut previous = None;
        for a in RawAttrIter::new(raw) {
            // Out of type-code order, where an attribute goes depends on the order of the
            // actions (PathAttributes::set inserts before the first higher code): the model's.
            if previous.is_some_and(|p| p >= a.type_code) {
                return None;
            }
            previous = Some(a.type_code);
            let f = Some(a.flags);
            match a.type_code {
                attr::LOCAL_PREF => {
                    e.local_pref.value =
                        items(a.value, u32::from_be_bytes).filter(|v| v.len() == 1)?;
                    e.local_pref.flags = f;
                }
                attr::MULTI_EXIT_DISC => {
                    e.med.value = items(a.value, u32::from_be_bytes).filter(|v| v.len() == 1)?;
                    e.med.flags = f;
                }
                attr::ORIGIN => {
                    e.origin.value = items(a.value, |b: [u8; 1]| b[0]).filter(|v| v.len() == 1)?;
                    e.origin.flags = f;
                }
                attr::COMMUNITIES => {
                    e.standard.value = items(a.value, u32::from_be_bytes)?;
                    e.standard.flags = f;
                }
                attr::EXTENDED_COMMUNITIES => {
                    e.extended.value = items(a.value, |b: [u8; 8]| b)?;
                    e.extended.flags = f;
                }
                attr::LARGE_COMMUNITY => {
                    e.large.value = items(a.value, large)?;
                    e.large.flags = f;
                }
                _ => {}
            }
        }
        Some(e)
    }

    fn number(slot: &mut Slot<u32>, op: NumOp, default: u32) {
        let v = op.on(slot.value.first().copied().unwrap_or(default));
        slot.value.clear();
        slot.value.push(v);
        slot.set(4);
    }

    fn add(&mut self, sets: &[Arc<CommunitySet>]) {
        let (s, x, l) = (&mut self.standard, &mut self.extended, &mut self.large);
        let (s0, x0, l0) = (s.value.len(), x.value.len(), l.value.len());
        for c in sets.iter().flat_map(|s| s.values()) {
            match c {
                Community::Standard(v) if !s.value.contains(&v) => s.value.push(v),
                Community::Extended(v) if !x.value.contains(&v) => x.value.push(v),
                Community::Large(v) if !l.value.contains(&v) => l.value.push(v),
                _ => {}
            }
        }
        if s.value.len() != s0 {
            s.set(4);
        }
        if x.value.len() != x0 {
            x.set(8);
        }
        if l.value.len() != l0 {
            l.set(12);
        }
    }

    fn delete(&mut self, sets: &[Arc<CommunitySet>]) {
        let hit = |c: Community| sets.iter().any(|s| s.any_matches(&c));
        fn keep<T: PartialEq + Copy>(slot: &mut Slot<T>, octets: usize, gone: impl Fn(T) -> bool) {
            if slot.flags.is_none() {
                return;
            }
            slot.value.retain(|v| !gone(*v));
            if slot.value.is_empty() {
                slot.remove();
            } else {
                slot.set(octets);
            }
        }
        keep(&mut self.standard, 4, |v| hit(Community::Standard(v)));
        keep(&mut self.extended, 8, |v| hit(Community::Extended(v)));
        keep(&mut self.large, 12, |v| hit(Community::Large(v)));
    }

    /// One action; false when it is not one this module makes.
    fn apply(&mut self, m: &Modify, out: &mut RawApplied) -> bool {
        match m {
            Modify::LocalPref(op) => {
                Self::number(&mut self.local_pref, *op, 100);
                out.local_pref_set = true;
            }
            Modify::Med(op) => {
                Self::number(&mut self.med, *op, 0);
                out.med_set = true;
            }
            Modify::Origin(o) => {
                self.origin.value.clear();
                self.origin.value.push(*o as u8);
                self.origin.set(1);
            }
            Modify::CommunityAdd(sets) => self.add(sets),
            Modify::CommunityDelete(sets) => self.delete(sets),
            Modify::CommunitySet(sets) => {
                self.standard.remove();
                self.extended.remove();
                self.large.remove();
                self.add(sets);
            }
            Modify::Prepend(_)
            | Modify::PrependOwn(_)
            | Modify::ExpandLastAs(_)
            | Modify::NextHop(_) => return false,
        }
        true
    }

    /// Writes one slot's attribute, its length in the form `Attribute::encode` uses.
    fn write<T: Copy>(
        slot: &Slot<T>,
        octets_each: usize,
        bytes: impl Fn(T, &mut Vec<u8>),
        out: &mut Vec<u8>,
    ) {
        let Some(mut flags) = slot.flags else {
            return;
        };
        let len = slot.value.len() * octets_each;
        if len > 255 {
            flags |= attr::flags::EXTENDED_LENGTH;
        }
        out.push(flags);
        out.push(slot.code);
        if flags & attr::flags::EXTENDED_LENGTH != 0 {
            out.extend_from_slice(&(len.min(65535) as u16).to_be_bytes());
        } else {
            out.push(len as u8);
        }
        for v in &slot.value {
            bytes(*v, out);
        }
    }

    /// Writes the slot of `code` if it changed; `None` for a code that is not a slot.
    fn write_code(&self, code: u8, out: &mut Vec<u8>) -> Option<()> {
        let u32s = |v: u32, o: &mut Vec<u8>| o.extend_from_slice(&v.to_be_bytes());
        match code {
            attr::LOCAL_PREF => Self::write(&self.local_pref, 4, u32s, out),
            attr::MULTI_EXIT_DISC => Self::write(&self.med, 4, u32s, out),
            attr::ORIGIN => Self::write(&self.origin, 1, |v, o| o.push(v), out),
            attr::COMMUNITIES => Self::write(&self.standard, 4, u32s, out),
            attr::EXTENDED_COMMUNITIES => {
                Self::write(&self.extended, 8, |v, o| o.extend_from_slice(&v), out)
            }
            attr::LARGE_COMMUNITY => Self::write(
                &self.large,
                12,
                |v, o| v.iter().for_each(|x| o.extend_from_slice(&x.to_be_bytes())),
                out,
            ),
            _ => return None,
        }
        Some(())
    }

    /// (code, changed, present) of each slot, in type-code order.
    fn slots(&self) -> [(u8, bool, bool); 6] {
        let s = |code, changed, flags: Option<u8>| (code, changed, flags.is_some());
        [
            s(attr::ORIGIN, self.origin.changed, self.origin.flags),
            s(attr::MULTI_EXIT_DISC, self.med.changed, self.med.flags),
            s(
                attr::LOCAL_PREF,
                self.local_pref.changed,
                self.local_pref.flags,
            ),
            s(
                attr::COMMUNITIES,
                self.standard.changed,
                self.standard.flags,
            ),
            s(
                attr::EXTENDED_COMMUNITIES,
                self.extended.changed,
                self.extended.flags,
            ),
            s(attr::LARGE_COMMUNITY, self.large.changed, self.large.flags),
        ]
    }

    /// The received bytes (in type-code order) with the changed slots written: each where
    /// its type code puts it, as `PathAttributes::set` inserts into an ordered list.
    fn finish(&self, raw: &[u8], out: &mut Vec<u8>) {
        let slots = self.slots();
        let had = |code: u8| RawAttrIter::new(raw).any(|a| a.type_code == code);
        let mut pending = slots
            .iter()
            .filter(|(c, changed, present)| *changed && *present && !had(*c))
            .map(|s| s.0)
            .peekable();
        for a in RawAttrIter::new(raw) {
            while let Some(c) = pending.next_if(|c| *c < a.type_code) {
                let _ = self.write_code(c, out);
            }
            let changed = slots.iter().any(|s| s.0 == a.type_code && s.1);
            if changed {
                // Removed: writes nothing.
                let _ = self.write_code(a.type_code, out);
            } else {
                a.encode(out);
            }
        }
        for c in pending {
            let _ = self.write_code(c, out);
        }
    }
}

impl Chain {
    /// [`Chain::apply`] on attribute bytes, writing the changed attributes to `out`; `None`,
    /// with `out` as it was, when some action of the verdict needs the decoded model, an
    /// attribute the actions read does not parse, or the attributes are not in type-code
    /// order (as every encoder we know sends them).
    pub fn apply_raw(&self, v: &Verdict, raw: &[u8], out: &mut Vec<u8>) -> Option<RawApplied> {
        if v.trace.overflow {
            return None;
        }
        let mut e = Edit::of(raw)?;
        let mut done = RawApplied::default();
        for &id in v.trace.ids.iter().take(usize::from(v.trace.len)) {
            let (item, term) = ((id >> 16) as usize, (id & 0xFFFF) as usize);
            let Some(Item::Statement(st)) = self.items.get(item) else {
                return None;
            };
            let t = st.terms.get(term)?;
            for m in &t.then.mods {
                if !e.apply(m, &mut done) {
                    return None;
                }
            }
        }
        e.finish(raw, out);
        Some(done)
    }
}
