//! A member whose table dump is under way follows the shards' live changes from DumpBegin:
//! a prefix changed and sent to it live before the walk reaches it is not sent again by the
//! walk (a reflector's clients got every prefix twice after a clear), and nothing is missed.

mod pipeline_fixture;

use pipeline_fixture::*;
use ribshard_adjout::MemberId;
use ribshard_engine::pipeline::Batcher;
use ribshard_wire::{Family, Nlri, Prefix};
use std::collections::HashMap;
use std::net::Ipv4Addr;

const PREFIXES: u32 = 40_000;

fn nth(i: u32) -> Prefix {
    Prefix::v4(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap()
}

/// Per prefix, the attributes (path attribute octets) it was last announced with, and the
/// announcements that repeated exactly what the member already held.
fn replay(sink: &TestSink) -> (HashMap<Prefix, Vec<u8>>, usize) {
    let bytes = sink.bytes.lock().unwrap();
    let mut rest: &[u8] = &bytes;
    let (mut held, mut repeated) = (HashMap::new(), 0);
    while let Ok(Some(len)) = ribshard_wire::frame(rest, 65535) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let body = &msg[19..];
        let u = ribshard_wire::parse_update(body, &params()).expect("an UPDATE");
        let wlen = usize::from(u16::from_be_bytes([body[0], body[1]]));
        let alen = usize::from(u16::from_be_bytes([body[2 + wlen], body[3 + wlen]]));
        let attrs = body[4 + wlen..4 + wlen + alen].to_vec();
        for n in u.withdrawn_all() {
            held.remove(&n.prefix);
        }
        for n in u.announced() {
            if held.insert(n.prefix, attrs.clone()).as_ref() == Some(&attrs) {
                repeated += 1;
            }
        }
    }
    (held, repeated)
}

#[test]
fn a_dump_skips_what_its_member_was_sent_live() {
    for (shards, uts) in [(1, 0), (2, 2)] {
        let p = start(shards, uts);
        let mut pool = Pool(HashMap::new());
        // Upstream 0's paths are long (variant 2); upstream 2's, sent while the member's
        // dump runs, are shorter and win.
        send_all(&p, p.peer_up(0, upstream(0), None).0);
        send_all(&p, p.peer_up(2, upstream(2), None).0);
        let mut b = Batcher::new(0, p.shards());
        let long = pool.get(0, 2, Family::Ipv4Unicast);
        for i in 0..PREFIXES {
            b.announce(&long, Nlri::new(nth(i)));
        }
        flush(&p, &mut b);
        p.barrier();
        let sink = TestSink::new();
        let id = MemberId {
            peer: member_peer(0),
            epoch: 1,
        };
        let up = p.peer_up(
            id.peer,
            upstream(2),
            Some((spec(0), id, Box::new(sink.clone()))),
        );
        send_all(&p, up.0);
        // Behind the member's PeerUp in the shards' queues: decided while its walk runs.
        let short = pool.get(2, 0, Family::Ipv4Unicast);
        let mut b = Batcher::new(2, p.shards());
        for i in 0..PREFIXES {
            b.announce(&short, Nlri::new(nth(i)));
            if i % 512 == 511 {
                flush(&p, &mut b);
            }
        }
        flush(&p, &mut b);
        p.barrier();
        let (held, repeated) = replay(&sink);
        assert_eq!(
            held.len(),
            PREFIXES as usize,
            "{shards}x{uts}: the whole table"
        );
        assert_eq!(repeated, 0, "{shards}x{uts}: prefixes sent twice alike");
        // Every prefix as upstream 2 has it: one attribute set.
        let sets: std::collections::HashSet<&Vec<u8>> = held.values().collect();
        assert_eq!(sets.len(), 1, "{shards}x{uts}: every prefix as it ended");
        p.stop();
    }
}
