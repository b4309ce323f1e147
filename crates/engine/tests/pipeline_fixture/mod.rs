//! What the pipeline tests share: upstream peers and their interned attribute sets, the
//! downstream members and their groups, a sink that keeps what a member is sent, and starting
//! and feeding a pipeline without sockets.
#![allow(dead_code)]

use ribshard_adjout::Sink;
use ribshard_engine::pipeline::{Batcher, Pipeline, PipelineConfig, Routed, Target};
use ribshard_rib::{GroupKind, GroupSpec, LoopChecks, Options, PeerInfo, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::{Family, Origin, Prefix, SessionParams};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const LOCAL_AS: u32 = 65000;
pub const CLUSTER: u32 = 0x0101_0101;

#[derive(Clone)]
pub struct TestSink {
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pub queued: Arc<AtomicUsize>,
    /// Octets its socket would still hold besides `queued` (a receiver that is behind).
    pub in_kernel: Arc<AtomicUsize>,
}

impl Sink for TestSink {
    fn send(&self, out: ribshard_adjout::Outgoing) -> bool {
        self.bytes.lock().unwrap().extend_from_slice(&out.bytes);
        true
    }
    fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
    fn unsent(&self) -> usize {
        self.queued() + self.in_kernel.load(Ordering::Relaxed)
    }
    fn neighbor(&self) -> &str {
        "test downstream"
    }
    fn duplicate(&self) -> Box<dyn Sink> {
        Box::new(self.clone())
    }
}

impl TestSink {
    pub fn new() -> TestSink {
        TestSink {
            bytes: Arc::default(),
            queued: Arc::default(),
            in_kernel: Arc::default(),
        }
    }

    /// UPDATE messages it was sent.
    pub fn messages(&self) -> usize {
        let bytes = self.bytes.lock().unwrap();
        let mut rest: &[u8] = &bytes;
        let mut n = 0;
        while let Ok(Some(len)) = ribshard_wire::frame(rest, 65535) {
            rest = &rest[len..];
            n += 1;
        }
        n
    }
}

pub fn start(shards: usize, update_threads: usize) -> Arc<Pipeline> {
    Pipeline::start(PipelineConfig {
        shards,
        update_threads,
        options: Options::default(),
        write_queue: Default::default(),
    })
}

pub fn send_all<T: Into<Routed>>(p: &Pipeline, msgs: Vec<T>) {
    msgs.into_iter().for_each(|t| p.blocking_send(t));
}

/// Hands a batcher's routes to their shards.
pub fn flush(p: &Pipeline, b: &mut Batcher) {
    send_all(
        p,
        b.take()
            .into_iter()
            .map(|(i, m)| Target::Shard(i, m))
            .collect(),
    );
}

/// Upstream peers: 0 and 1 in AS 65001 (MED compared), 2 in AS 65002, 3 an iBGP route
/// reflection client.
pub fn upstream(i: u32) -> PeerInfo {
    PeerInfo {
        ebgp: i != 3,
        router_id: 0x0a00_0001 + i,
        address: u128::from(0x7f00_0010 + i),
        local_as: LOCAL_AS,
        peer_as: [65001, 65001, 65002, LOCAL_AS][i as usize],
        rr_cluster: (i == 3).then_some(CLUSTER),
        rs_client: false,
    }
}

pub fn params() -> SessionParams {
    SessionParams {
        four_octet_as: true,
        ..SessionParams::default()
    }
}

/// Downstream members: (group name, kind, peer AS).
pub const MEMBERS: [(&str, GroupKind, u32); 6] = [
    ("transit", GroupKind::External, 65010),
    ("transit", GroupKind::External, 65010),
    ("back-to-65001", GroupKind::External, 65001),
    (
        "ibgp",
        GroupKind::Internal {
            client_cluster: None,
        },
        LOCAL_AS,
    ),
    (
        "clients",
        GroupKind::Internal {
            client_cluster: Some(CLUSTER),
        },
        LOCAL_AS,
    ),
    ("rs", GroupKind::RouteServer, 0),
];

pub fn spec(m: usize) -> GroupSpec {
    let (name, kind, peer_as) = MEMBERS[m];
    GroupSpec {
        long_lived: false,
        name: name.into(),
        kind,
        local_as: LOCAL_AS,
        global_as: None,
        peer_as,
        router_id: Ipv4Addr::new(192, 0, 2, 1),
        next_hop_self: kind == GroupKind::External,
        local_v4: Some(Ipv4Addr::new(127, 0, 0, 1)),
        local_v6: None,
        export: std::sync::Arc::new(ribshard_policy::Chain::accept_all()),
        params: params(),
        families: [true, true],
        role: None,
        add_path: None,
    }
}

pub fn member_peer(m: usize) -> u32 {
    10 + m as u32
}

pub fn prefix(i: u8) -> Prefix {
    if i < 32 {
        Prefix::v4(Ipv4Addr::new(10, i, 0, 0), 16).unwrap()
    } else {
        Prefix::v6(
            Ipv6Addr::new(0x2001, 0xdb8, u16::from(i), 0, 0, 0, 0, 0),
            48,
        )
        .unwrap()
    }
}

/// Attribute sets per (peer, variant, family), interned: one `Arc` each.
pub struct Pool(pub HashMap<(u32, u8, Family), Arc<RouteAttrs>>);

impl Pool {
    pub fn get(&mut self, peer: u32, variant: u8, f: Family) -> Arc<RouteAttrs> {
        self.0
            .entry((peer, variant, f))
            .or_insert_with(|| {
                let info = upstream(peer);
                let mut path: Vec<u32> = if info.ebgp {
                    vec![info.peer_as]
                } else {
                    vec![]
                };
                path.extend((0..variant % 3).map(|k| 64600 + u32::from(k)));
                if variant == 4 {
                    // A loop: our own AS in the path; kept but never eligible.
                    path.push(LOCAL_AS);
                }
                let mut v = vec![
                    AttrValue::Origin(Origin::Igp),
                    AttrValue::AsPath(AsPath::sequence(path)),
                    AttrValue::Med(u32::from(variant) * 10 + peer),
                    AttrValue::Communities(vec![65000 << 16 | u32::from(variant)]),
                ];
                if !info.ebgp {
                    v.push(AttrValue::LocalPref(100 + u32::from(variant)));
                }
                let nh: Vec<u8> = match f {
                    Family::Ipv4Unicast => {
                        v.push(AttrValue::NextHop(Ipv4Addr::new(
                            198,
                            51,
                            100,
                            peer as u8 + 1,
                        )));
                        vec![198, 51, 100, peer as u8 + 1]
                    }
                    Family::Ipv6Unicast => {
                        Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, peer as u16 + 1)
                            .octets()
                            .to_vec()
                    }
                };
                let checks = LoopChecks {
                    local_as: LOCAL_AS,
                    loops: 1,
                    router_id: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
                    cluster_ids: vec![CLUSTER],
                    ..LoopChecks::default()
                };
                Arc::new(RouteAttrs::from_attributes(
                    &PathAttributes::canonical(v),
                    &nh,
                    &checks,
                ))
            })
            .clone()
    }
}

/// A property test's configuration that keeps failing cases in
/// `tests/NAME.proptest-regressions` of this package, whatever the working directory
/// (proptest's default looks for a lib.rs from a workspace-relative path, found none under
/// the test command, and saved nothing).
pub fn persisted(cases: u32, name: &str) -> proptest::test_runner::Config {
    // Direct takes a 'static path: a few octets, once per test.
    let path: &'static str = Box::leak(
        format!(
            "{}/tests/{name}.proptest-regressions",
            env!("CARGO_MANIFEST_DIR")
        )
        .into_boxed_str(),
    );
    proptest::test_runner::Config {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(path),
        )),
        ..proptest::test_runner::Config::default()
    }
}

pub type BestPaths = std::collections::BTreeMap<Prefix, (u32, Vec<u8>)>;
pub type PostPolicy = std::collections::BTreeMap<(Prefix, u32, u32), Vec<u8>>;

/// A subscriber of the shards' change stream that keeps the best path of every prefix as
/// the changes tell it, so a test can hold it to the Loc-RIB. Its taps check what the
/// stream promises: changes to one prefix come from one shard.
#[derive(Clone, Default)]
pub struct Recorder {
    /// Prefix -> (peer, attribute key) of the best path.
    pub best: Arc<Mutex<BestPaths>>,
    /// (prefix, peer, path id) -> attribute key of every path import policy accepted, as
    /// the post-policy changes tell it.
    pub post_policy: Arc<Mutex<PostPolicy>>,
    /// Changes seen, barriers passed, and how many times a shard said its deferral ended.
    pub changes: Arc<AtomicUsize>,
    pub barriers: Arc<AtomicUsize>,
    pub advertising: Arc<AtomicUsize>,
}

struct RecorderTap {
    r: Recorder,
    shard: usize,
    shards: usize,
}

impl ribshard_engine::pipeline::Subscriber for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn tap(&self, shard: usize, shards: usize) -> Box<dyn ribshard_engine::pipeline::Tap> {
        Box::new(RecorderTap {
            r: self.clone(),
            shard,
            shards,
        })
    }
}

impl ribshard_engine::pipeline::Tap for RecorderTap {
    fn decided(&mut self, _table: &ribshard_rib::Shard, changes: &[ribshard_rib::Change]) {
        let mut best = self.r.best.lock().unwrap();
        for c in changes {
            assert_eq!(
                ribshard_rib::shard_of(&c.prefix, self.shards),
                self.shard,
                "{:?} from a shard that does not own it",
                c.prefix
            );
            match &c.best {
                Some(b) => best.insert(c.prefix, (b.peer, b.attrs.key().to_vec())),
                None => best.remove(&c.prefix),
            };
        }
        self.r.changes.fetch_add(changes.len(), Ordering::Relaxed);
    }
    fn barrier(&mut self, done: ribshard_engine::pipeline::Passed) {
        self.r.barriers.fetch_add(1, Ordering::Relaxed);
        done.pass();
    }
    fn advertising(&mut self) {
        self.r.advertising.fetch_add(1, Ordering::Relaxed);
    }
    fn wants_post_policy(&self) -> bool {
        true
    }
    fn post_policy(&mut self, changes: &[ribshard_rib::AdjRibInChange]) {
        let mut t = self.r.post_policy.lock().unwrap();
        for c in changes {
            assert_eq!(ribshard_rib::shard_of(&c.prefix, self.shards), self.shard);
            let k = (c.prefix, c.peer, c.path_id);
            match &c.attrs {
                Some(a) => t.insert(k, a.key().to_vec()),
                None => t.remove(&k),
            };
        }
    }
}

/// Every path import policy accepted, as a walk of the shards shows it.
pub fn post_policy(p: &Arc<Pipeline>) -> PostPolicy {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut out = PostPolicy::new();
        for f in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let mut query = ribshard_engine::pipeline::RouteQuery::whole_table(f);
            query.filter.hidden = true;
            let mut walk = p.walk_routes(query, None);
            while let Some(routes) = walk.next().await {
                for r in routes {
                    for v in r
                        .view
                        .paths
                        .iter()
                        .filter(|v| !v.path.gone() && v.path.accepted())
                    {
                        out.insert(
                            (r.view.prefix, v.path.peer, v.path.path_id),
                            v.path.attrs.key().to_vec(),
                        );
                    }
                }
            }
        }
        out
    })
}

impl Recorder {
    /// What the stream says the Loc-RIB is, as `Pipeline::loc_rib` gives it.
    pub fn table(&self) -> Vec<(Prefix, u32, Vec<u8>)> {
        self.best
            .lock()
            .unwrap()
            .iter()
            .map(|(p, (peer, key))| (*p, *peer, key.clone()))
            .collect()
    }
}

/// A pipeline with a recorder subscribed to its change stream.
pub fn start_recorded(shards: usize, update_threads: usize) -> (Arc<Pipeline>, Recorder) {
    let r = Recorder::default();
    let p = Pipeline::start_with(
        PipelineConfig {
            shards,
            update_threads,
            options: Options::default(),
            write_queue: Default::default(),
        },
        ribshard_engine::pipeline::Inputs {
            subscribers: vec![Arc::new(r.clone())],
            ..Default::default()
        },
    );
    (p, r)
}
