//! A member moving between two update groups, driven step by step on the groups
//! themselves (no threads), so the order that a race produces only rarely in the pipeline
//! is fixed here: a shard that has not handed the member over yet still speaks to it
//! through the old group, for its table dump as for its live changes.

mod pipeline_fixture;

use pipeline_fixture::*;
use ribshard_adjout::{Entry, MemberId, UpdateGroup, WriteQueueLimits};
use ribshard_wire::{frame, parse_update, Prefix};
use std::sync::Arc;

fn withdrawn(bytes: &[u8]) -> Vec<Prefix> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Ok(Some(len)) = frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let u = parse_update(&msg[19..], &params()).expect("valid UPDATEs");
        out.extend(u.withdrawn_all().map(|n| n.prefix));
    }
    out
}

/// The member's old group is dumping to it (its dump withdraws what the spec before that
/// one exported) when it moves on again. Shard 0 hands it over at once; shard 1's walk
/// goes on, and its withdrawal must still reach the member: the shard counts it sent, and
/// the new group's dump will not find the prefix in the table to withdraw it again.
#[test]
fn a_moving_member_gets_the_dump_parts_of_shards_not_handed_over() {
    let limits = WriteQueueLimits::new(1 << 20);
    let old_spec = Arc::new(spec(5));
    let new_spec = Arc::new(spec(0));
    let mut old = UpdateGroup::new(1, old_spec.clone(), 2, limits);
    let mut new = UpdateGroup::new(2, new_spec, 2, limits);
    let sink = TestSink::new();
    let member = MemberId { peer: 15, epoch: 0 };
    let token = 7;
    old.join(member, Box::new(sink.clone()), token);
    old.dump_begin(0, member, token);
    old.dump_begin(1, member, token);

    let moving = old.start_move(member).expect("a member of the group");
    let _request = new.join_moved(moving, 1, old_spec);
    let _ = old.hand_over(member, 0);

    let gone = prefix(37);
    let key = (0u64, 3u32);
    old.dump(1, &[(member, token)], vec![(key, Entry::withdraw(gone))]);
    old.dump_end(1, member, token);
    assert_eq!(
        withdrawn(&sink.bytes.lock().unwrap()),
        vec![gone],
        "shard 1 had not handed the member over: its dump's withdrawal reaches it"
    );

    // Once shard 1 hands it over too, the old group sends it nothing more.
    let _ = old.hand_over(member, 1);
    let before = sink.bytes.lock().unwrap().len();
    old.dump(
        1,
        &[(member, token)],
        vec![(key, Entry::withdraw(prefix(38)))],
    );
    assert_eq!(sink.bytes.lock().unwrap().len(), before);
}
