//! `[[bgp.originate]]` at run time: the networks we advertise, entering the pipeline as the
//! routes of a neighbor of our own AS (a [`LocalSource`] under a reserved peer index), each
//! with an empty AS_PATH. One with `when = "covering-route"` is announced while the kernel's
//! tables hold a route of another protocol equal to or covering it, and withdrawn when the
//! last one goes (looked at again with every snapshot the kernel watcher publishes).
//! Changes of the list are applied by a reload, with sessions kept.

use crate::config::{Originate, When};
use ribshard_engine::local::LocalSource;
use ribshard_engine::pipeline::Pipeline;
use ribshard_fib::Published;
use ribshard_rib::{LoopChecks, PeerInfo, RouteAttrs};
use ribshard_wire::attributes::{AsPath, AttrValue, PathAttributes};
use ribshard_wire::Nlri;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

enum Msg {
    /// The kernel's tables may have changed.
    Look,
    Set(Vec<Originate>),
    Stop,
}

/// What `show` tells of an originated network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Originated {
    pub network: Originate,
    pub advertised: bool,
}

pub struct Originator {
    tx: Mutex<Sender<Msg>>,
    state: Arc<Mutex<Vec<Originated>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Its peer index in the pipeline.
    pub peer: u32,
}

/// The attribute set of a network: ORIGIN, an empty AS_PATH, what it is configured with.
fn attrs_of(o: &Originate) -> (Arc<RouteAttrs>, Vec<u8>) {
    let mut v = vec![
        AttrValue::Origin(o.origin),
        AttrValue::AsPath(AsPath::default()),
    ];
    if let Some(IpAddr::V4(a)) = o.next_hop {
        v.push(AttrValue::NextHop(a));
    }
    v.extend(o.med.map(AttrValue::Med));
    v.extend(o.local_preference.map(AttrValue::LocalPref));
    if !o.communities.is_empty() {
        v.push(AttrValue::Communities(o.communities.clone()));
    }
    // No next hop: each neighbor is sent our own address (export's next-hop-self rule).
    let nh: Vec<u8> = match o.next_hop {
        Some(IpAddr::V4(a)) => a.octets().to_vec(),
        Some(IpAddr::V6(a)) => a.octets().to_vec(),
        None => Vec::new(),
    };
    (
        Arc::new(RouteAttrs::from_attributes(
            &PathAttributes::canonical(v),
            &nh,
            &LoopChecks::default(),
        )),
        nh,
    )
}

impl Originator {
    /// Starts announcing `networks` under peer index `peer` (reserved), as from a neighbor
    /// of AS `local_as` whose paths export as eBGP-learned ones do (to every iBGP
    /// neighbor, our AS put in front towards eBGP ones).
    pub fn start(
        pipeline: Arc<Pipeline>,
        peer: u32,
        local_as: u32,
        router_id: Ipv4Addr,
        networks: Vec<Originate>,
        kernel: Arc<Published>,
    ) -> Originator {
        let (tx, rx) = channel();
        let state: Arc<Mutex<Vec<Originated>>> = Arc::default();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name("rs-originate".into())
            .spawn(move || {
                let work = ribshard_engine::telemetry::register(
                    ribshard_engine::telemetry::ThreadKind::Local,
                    peer as usize,
                );
                let info = PeerInfo {
                    ebgp: true,
                    router_id: u32::from(router_id),
                    address: 0,
                    local_as,
                    peer_as: local_as,
                    rr_cluster: None,
                    rs_client: false,
                };
                let mut source = LocalSource::up(pipeline, peer, info);
                let mut list: Vec<(Originated, Arc<RouteAttrs>)> = Vec::new();
                let mut next = Some(Msg::Set(networks));
                loop {
                    let msg = match next.take() {
                        Some(m) => m,
                        None => match rx.recv() {
                            Ok(m) => m,
                            Err(_) => break,
                        },
                    };
                    match msg {
                        Msg::Stop => break,
                        Msg::Look => {}
                        Msg::Set(networks) => {
                            // Those gone or changed are withdrawn first.
                            list.retain(|(o, _)| {
                                let keep = networks.contains(&o.network);
                                if !keep && o.advertised {
                                    source.withdraw(Nlri::new(o.network.prefix));
                                }
                                keep
                            });
                            for n in networks {
                                if !list.iter().any(|(o, _)| o.network == n) {
                                    let (a, _) = attrs_of(&n);
                                    list.push((
                                        Originated {
                                            network: n,
                                            advertised: false,
                                        },
                                        a,
                                    ));
                                }
                            }
                        }
                    }
                    let view = kernel.load();
                    for (o, attrs) in list.iter_mut() {
                        let want = match o.network.when {
                            When::Always => true,
                            When::CoveringRoute => view.covered(&o.network.prefix),
                        };
                        if want != o.advertised {
                            tracing::info!(
                                network = %o.network.prefix,
                                advertised = want,
                                "originated network {}",
                                if want { "advertised" } else { "withdrawn (no covering route)" }
                            );
                            if want {
                                source.announce(attrs, Nlri::new(o.network.prefix));
                            } else {
                                source.withdraw(Nlri::new(o.network.prefix));
                            }
                            o.advertised = want;
                        }
                    }
                    source.flush();
                    *shared.lock().unwrap_or_else(|e| e.into_inner()) =
                        list.iter().map(|(o, _)| o.clone()).collect();
                    work.item(std::time::Duration::ZERO);
                }
                source.down();
            })
            .ok();
        Originator {
            tx: Mutex::new(tx),
            state,
            thread: Mutex::new(thread),
            peer,
        }
    }

    fn send(&self, m: Msg) {
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(m);
    }

    /// The kernel's tables may have changed: look at the covering routes again.
    pub fn kernel_changed(&self) {
        self.send(Msg::Look);
    }

    /// A reload's new list.
    pub fn set(&self, networks: Vec<Originate>) {
        self.send(Msg::Set(networks));
    }

    /// Each network and whether it is advertised now.
    pub fn state(&self) -> Vec<Originated> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Withdraws every network and ends.
    pub fn stop(&self) {
        self.send(Msg::Stop);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Drop for Originator {
    fn drop(&mut self) {
        self.stop();
    }
}
