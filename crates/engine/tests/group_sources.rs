//! An update group whose members are also the sources of paths (route-server and
//! route-reflector clients) encodes once: each member gets every path but its own (on live
//! changes, withdrawn instead where it may hold another path of ours), and the group's
//! counters show each prefix packed once, not once per member.

mod pipeline_fixture;

use pipeline_fixture::*;
use ribshard_adjout::{
    Entry, MemberId, Outgoing, Sink, UpdateGroup, WriteQueueLimits, NOTHING_BEFORE,
};
use ribshard_rib::Exported;
use ribshard_wire::{frame, parse_update, Family, Prefix};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Keeps what it is handed, piece by piece.
#[derive(Clone, Default)]
struct Pieces(Arc<Mutex<Vec<Outgoing>>>);

impl Sink for Pieces {
    fn send(&self, out: Outgoing) -> bool {
        self.0.lock().unwrap().push(out);
        true
    }
    fn queued(&self) -> usize {
        0
    }
    fn neighbor(&self) -> &str {
        "test member"
    }
    fn duplicate(&self) -> Box<dyn Sink> {
        Box::new(self.clone())
    }
}

#[derive(Debug, Default, PartialEq)]
struct Got {
    announced: BTreeSet<Prefix>,
    withdrawn: BTreeSet<Prefix>,
}

impl Pieces {
    /// What the member was sent since the last call, End-of-RIB aside; checks that each
    /// piece holds whole messages, as many as it says.
    fn take(&self) -> Got {
        let mut got = Got::default();
        for out in self.0.lock().unwrap().drain(..) {
            let mut rest: &[u8] = &out.bytes;
            let mut messages = 0;
            while let Ok(Some(len)) = frame(rest, 65535) {
                let (msg, tail) = rest.split_at(len);
                rest = tail;
                messages += 1;
                let u = parse_update(&msg[19..], &params()).expect("valid UPDATE");
                if u.end_of_rib().is_some() {
                    continue;
                }
                got.announced.extend(u.announced().map(|n| n.prefix));
                got.withdrawn.extend(u.withdrawn_all().map(|n| n.prefix));
            }
            assert!(rest.is_empty(), "whole messages only");
            assert_eq!(messages, out.messages, "the piece's message count");
        }
        got
    }
}

fn set(path: &[u8]) -> Arc<Exported> {
    // ORIGIN IGP, AS_PATH of one AS_SEQUENCE (4-octet ASNs), NEXT_HOP 192.0.2.1.
    let mut attrs = vec![
        0x40,
        1,
        1,
        0,
        0x40,
        2,
        2 + 4 * path.len() as u8,
        2,
        path.len() as u8,
    ];
    for a in path {
        attrs.extend([0, 0, 0xfd, *a]);
    }
    attrs.extend([0x40, 3, 4, 192, 0, 2, 1]);
    Arc::new(Exported {
        family: Family::Ipv4Unicast,
        attrs: attrs.into(),
        mp_next_hop: Box::new([]),
    })
}

fn announce(i: u8, e: &Arc<Exported>, source: u32) -> Entry {
    Entry::announce(prefix(i), e.clone(), source, 0)
}

/// The same change, where the group advertised `before`'s path (or nothing) before it.
fn after(mut e: Entry, before: u32) -> Entry {
    e.before = before;
    e
}

fn prefixes(is: &[u8]) -> BTreeSet<Prefix> {
    is.iter().map(|i| prefix(*i)).collect()
}

#[test]
fn members_that_are_sources_share_one_encoding_without_their_own_paths() {
    let mut group = UpdateGroup::new(1, Arc::new(spec(5)), 1, WriteQueueLimits::default());
    let ids = [1u32, 2, 3].map(|peer| MemberId { peer, epoch: 0 });
    let sinks = [Pieces::default(), Pieces::default(), Pieces::default()];
    let token = 9;
    for (id, sink) in ids.iter().zip(&sinks) {
        group.join(*id, Box::new(sink.clone()), token);
        group.dump_begin(0, *id, token);
    }
    // One set from members 1 and 2 alike, one from member 2 only, one from a peer that is
    // not a member; and a withdrawal.
    let (a, b, c) = (set(&[1]), set(&[2, 3]), set(&[99]));
    let entries = [
        announce(1, &a, 1),
        announce(2, &a, 1),
        announce(3, &a, 2),
        announce(4, &b, 2),
        announce(5, &c, 99),
        Entry::withdraw(prefix(6)),
    ];
    let dump: Vec<_> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| ((i as u64, 0), e.clone()))
        .collect();
    let members: Vec<_> = ids.iter().map(|id| (*id, token)).collect();
    group.dump(0, &members, dump);
    for id in ids {
        group.dump_end(0, id, token);
    }
    let withdrawn = prefixes(&[6]);
    let expect = |announced: &[u8], withdrawn: &BTreeSet<Prefix>| Got {
        announced: prefixes(announced),
        withdrawn: withdrawn.clone(),
    };
    assert_eq!(sinks[0].take(), expect(&[3, 4, 5], &withdrawn), "member 1");
    assert_eq!(sinks[1].take(), expect(&[1, 2, 5], &withdrawn), "member 2");
    assert_eq!(
        sinks[2].take(),
        expect(&[1, 2, 3, 4, 5], &withdrawn),
        "member 3"
    );
    assert_eq!(
        group.stats.prefixes_advertised, 5,
        "each prefix packed once for the three members"
    );

    // Live: a member's own paths are withdrawn from it instead where it holds another path
    // of ours (the group advertised another peer's before), and not where it cannot (the
    // group advertised nothing, or the member's own path, which it was never sent).
    let live = [
        after(entries[0].clone(), 3),
        after(entries[1].clone(), NOTHING_BEFORE),
        after(entries[2].clone(), 2),
        after(entries[3].clone(), 99),
        entries[4].clone(),
        entries[5].clone(),
    ];
    group.live(0, &live);
    assert_eq!(
        sinks[0].take(),
        expect(&[3, 4, 5], &prefixes(&[1, 6])),
        "member 1, live"
    );
    assert_eq!(
        sinks[1].take(),
        expect(&[1, 2, 5], &prefixes(&[4, 6])),
        "member 2, live"
    );
    assert_eq!(
        sinks[2].take(),
        expect(&[1, 2, 3, 4, 5], &withdrawn),
        "member 3, live"
    );
    assert_eq!(group.stats.prefixes_advertised, 10);
}

#[test]
fn a_group_is_dumping_until_every_shard_has_ended_every_members_dump() {
    // Two shards: the update worker gives memory back only once no group is dumping.
    let mut group = UpdateGroup::new(1, Arc::new(spec(5)), 2, WriteQueueLimits::default());
    let ids = [1u32, 2].map(|peer| MemberId { peer, epoch: 0 });
    let sink = Pieces::default();
    let token = 3;
    assert!(!group.dumping(), "no member yet");
    for id in ids {
        group.join(id, Box::new(sink.clone()), token);
    }
    assert!(group.dumping(), "members waiting for their dumps");
    let a = set(&[1]);
    let members: Vec<_> = ids.iter().map(|id| (*id, token)).collect();
    for shard in 0..2 {
        for id in ids {
            group.dump_begin(shard, id, token);
        }
        let part = vec![((shard as u64, 0), announce(shard as u8 + 1, &a, 7))];
        group.dump(shard, &members, part);
    }
    for id in ids {
        group.dump_end(0, id, token);
    }
    assert!(group.dumping(), "shard 1 has not ended its walk");
    group.dump_end(1, ids[0], token);
    assert!(group.dumping(), "member 2 still waits for shard 1");
    group.dump_end(1, ids[1], token);
    assert!(!group.dumping(), "every member in step");
    assert_eq!(sink.take().announced, prefixes(&[1, 2]));
}
