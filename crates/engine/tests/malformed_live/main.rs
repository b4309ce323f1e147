//! Malformed input over live sessions: every case is sent by a scripted speaker to a running
//! pipeline, from eBGP, iBGP, 2-octet-AS, Add-Path and extended-message peers, and for each
//! the test asserts the outcome the RFCs give (the NOTIFICATION's exact bytes, or the route
//! withdrawn, kept or kept without an attribute), that no other session moved, that the
//! pipeline still answers `show route`, and what two downstream peers received: nothing they
//! cannot decode, nothing wrong, nothing lost. The cases are in `cases_*.rs`.

#[path = "../common/mod.rs"]
mod common;

mod bytes;
mod cases_attributes;
mod cases_families;
mod cases_session;
mod downstream;

use common::harness;
use common::peers::ebgp_peer;
use common::rawpeer::RawPeer;
use downstream::Downstream;
use ribshard_engine::pipeline::{Pipeline, RouteQuery, Selection};
use ribshard_engine::{PeerSettings, SessionStatus, Sessions};
use ribshard_fsm::State;
use ribshard_rib::PathState;
use ribshard_wire::attributes::PathAttributes;
use ribshard_wire::open::{AddPathFamily, Capability};
use ribshard_wire::{decode, Family, Message, Notification, Open, Prefix, SessionParams};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const LOCAL_AS: u32 = 65100;
const ROUTER_ID: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 90);
const BYSTANDER: ([u8; 4], u32) = ([127, 0, 7, 1], 65701);
const DOWN: ([u8; 4], u32) = ([127, 0, 7, 2], 65702);
const DOWN_EXTENDED: ([u8; 4], u32) = ([127, 0, 7, 3], 65703);
/// What the bystander announces: it must stay at both downstreams through every case.
const BYSTANDER_PREFIX: [u8; 4] = [192, 0, 2, 0];

/// The kind of session a case is sent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// eBGP, 4-octet ASes, no extended messages.
    Ebgp,
    /// iBGP (our AS).
    Ibgp,
    /// eBGP from a speaker without the 4-octet AS capability (RFC 6793).
    TwoOctet,
    /// eBGP with Add-Path receive for both families (RFC 7911).
    AddPath,
    /// eBGP with extended messages (RFC 8654).
    Extended,
    /// eBGP, a new connection for a case about OPEN or the states before Established.
    Fresh,
}

/// When in the session the case's message is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// In Established, after a good announcement of the case's prefix.
    Established,
    /// As the first message, instead of an OPEN (OpenSent at ribshard).
    OpenSent,
    /// After a good OPEN, instead of the KEEPALIVE (OpenConfirm at ribshard).
    OpenConfirm,
}

/// What must come of a case.
pub enum Expect {
    /// A NOTIFICATION of exactly these bytes, then the connection closes, and every route
    /// of the session is withdrawn.
    Reset {
        code: u8,
        subcode: u8,
        data: Vec<u8>,
    },
    /// The connection closes without a NOTIFICATION (the neighbor sent one).
    Closed,
    /// Treat-as-withdraw, or a route RFC 4271 says to ignore: the prefix is withdrawn, the
    /// session stays up.
    Withdrawn,
    /// Attribute discard: the route stands without the attribute of this type.
    Discarded(u8),
    /// The route stands; the check, if any, judges its attributes in the Loc-RIB.
    Kept(Option<Check>),
    /// The route stands but its attributes are too large for a peer without extended
    /// messages (RFC 8654 section 4: not sent, and withdrawn if it was); `extended`: still
    /// within 65,535 octets for the peer with them.
    TooLarge { extended: bool },
    /// The OPEN is accepted: the session comes up.
    Up,
}

pub type Check = Box<dyn Fn(&PathAttributes) -> Result<(), String>>;

impl Expect {
    pub fn reset(code: u8, subcode: u8, data: &[u8]) -> Expect {
        Expect::Reset {
            code,
            subcode,
            data: data.to_vec(),
        }
    }
    pub fn kept() -> Expect {
        Expect::Kept(None)
    }
    pub fn kept_if(f: impl Fn(&PathAttributes) -> Result<(), String> + 'static) -> Expect {
        Expect::Kept(Some(Box::new(f)))
    }
}

/// One case: a name that says what is wrong and which RFC section rules it.
pub struct Case {
    pub name: String,
    pub kind: Kind,
    pub phase: Phase,
    /// The case's prefix is IPv6 (its good announcement in MP_REACH_NLRI).
    pub v6: bool,
    pub build: Build,
}

/// Builds a case's message, and what must come of it, for the peer that sends it.
pub type Build = Box<dyn Fn(&Ctx) -> (Vec<u8>, Expect)>;

pub fn case(
    name: impl Into<String>,
    kind: Kind,
    build: impl Fn(&Ctx) -> (Vec<u8>, Expect) + 'static,
) -> Case {
    Case {
        name: name.into(),
        kind,
        phase: Phase::Established,
        v6: false,
        build: Box::new(build),
    }
}

impl Case {
    pub fn in_phase(mut self, p: Phase) -> Case {
        self.phase = p;
        self
    }
    pub fn v6(mut self) -> Case {
        self.v6 = true;
        self
    }
}

/// What a case builds its message from: the sending peer and the case's own prefix.
pub struct Ctx {
    pub asn: u32,
    pub kind: Kind,
    index: u16,
}

impl Ctx {
    /// 10.x.y.0/24, x.y the case's number.
    pub fn prefix(&self) -> Prefix {
        let [hi, lo] = self.index.to_be_bytes();
        Prefix::v4(Ipv4Addr::new(10, hi, lo, 0), 24).unwrap()
    }
    /// 2001:db8:n::/48, n the case's number.
    pub fn prefix6(&self) -> Prefix {
        Prefix::v6(Ipv6Addr::new(0x2001, 0xdb8, self.index, 0, 0, 0, 0, 0), 48).unwrap()
    }
    fn path_id(&self) -> &'static [u8] {
        if self.kind == Kind::AddPath {
            &[0, 0, 0, 1]
        } else {
            &[]
        }
    }
    /// The case's prefix as NLRI (with a path identifier on Add-Path sessions).
    pub fn nlri(&self) -> Vec<u8> {
        let [hi, lo] = self.index.to_be_bytes();
        [self.path_id(), &[24, 10, hi, lo]].concat()
    }
    pub fn nlri6(&self) -> Vec<u8> {
        let [hi, lo] = self.index.to_be_bytes();
        [self.path_id(), &[48, 0x20, 1, 0xd, 0xb8, hi, lo]].concat()
    }
    /// The AS_PATH this peer sends: its AS, nothing over iBGP.
    pub fn as_path(&self) -> Vec<u8> {
        match self.kind {
            Kind::Ibgp => bytes::attr(0x40, 2, &[]),
            Kind::TwoOctet => bytes::as_path2(&[(2, vec![self.asn as u16])]),
            _ => bytes::as_path4(&[(2, vec![self.asn])]),
        }
    }
    /// A good attribute set: ORIGIN, AS_PATH, NEXT_HOP and, over iBGP, LOCAL_PREF.
    pub fn base(&self) -> Vec<Vec<u8>> {
        let mut v = vec![
            bytes::origin(0),
            self.as_path(),
            bytes::next_hop([198, 51, 100, 9]),
        ];
        if self.kind == Kind::Ibgp {
            v.push(bytes::attr(0x40, 5, &100u32.to_be_bytes()));
        }
        v
    }
    /// The good attributes with the one of `code` replaced (or left out: `None`).
    pub fn with(&self, code: u8, new: Option<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = self.base().into_iter().filter(|a| a[1] != code).collect();
        v.extend(new);
        v
    }
    /// The good attributes and one more.
    pub fn plus(&self, extra: Vec<u8>) -> Vec<Vec<u8>> {
        let mut v = self.base();
        v.push(extra);
        v
    }
    /// The case's prefix announced with these attributes.
    pub fn announce(&self, attrs: Vec<Vec<u8>>) -> Vec<u8> {
        bytes::update(&[], &attrs, &self.nlri())
    }
    /// The case's IPv6 prefix announced with these attributes and MP_REACH_NLRI.
    pub fn announce6(&self, attrs: Vec<Vec<u8>>) -> Vec<u8> {
        let mut attrs: Vec<Vec<u8>> = attrs.into_iter().filter(|a| a[1] != 3).collect();
        attrs.push(bytes::mp_reach(2, 1, &bytes::NH6, &self.nlri6()));
        bytes::update(&[], &attrs, &[])
    }
    /// The OPEN this peer sends, its parameters given.
    pub fn open(&self, params: &[u8]) -> Vec<u8> {
        bytes::message(
            1,
            &bytes::open_body(4, self.asn as u16, 0, [10, 0, 0, 2], params),
        )
    }
    /// The capabilities a good OPEN of this peer carries.
    pub fn good_caps(&self) -> Vec<Vec<u8>> {
        vec![
            bytes::multiprotocol(1, 1),
            bytes::multiprotocol(2, 1),
            bytes::four_octet_as(self.asn),
        ]
    }
}

/// Scripted peers of one kind, used in turn, so that a reset one has time to come out of
/// its idle hold before it is used again.
struct Pool {
    peers: Vec<Slot>,
    next: usize,
}

struct Slot {
    addr: IpAddr,
    asn: u32,
    index: usize,
    conn: Option<RawPeer>,
}

fn pool_addresses(kind: Kind) -> (u8, u32, usize) {
    match kind {
        Kind::Ebgp => (1, 65101, 6),
        Kind::Ibgp => (2, LOCAL_AS, 6),
        Kind::TwoOctet => (3, 65301, 4),
        Kind::AddPath => (4, 65401, 4),
        Kind::Extended => (5, 65501, 4),
        Kind::Fresh => (6, 65601, 8),
    }
}

const KINDS: [Kind; 6] = [
    Kind::Ebgp,
    Kind::Ibgp,
    Kind::TwoOctet,
    Kind::AddPath,
    Kind::Extended,
    Kind::Fresh,
];

fn settings(addr: [u8; 4], asn: u32, kind: Option<Kind>) -> PeerSettings {
    let downstream = kind.is_none();
    let mut p = ebgp_peer(addr, asn, LOCAL_AS, ROUTER_ID, downstream);
    match kind {
        Some(Kind::Ibgp) => {
            p.internal = true;
            p.routing.group = "internal".into();
        }
        Some(Kind::AddPath) => p.add_path_receive = true,
        _ => {}
    }
    p
}

/// The pipeline, its sessions and every scripted peer.
struct World {
    listen: SocketAddr,
    pipeline: Arc<Pipeline>,
    sessions: Sessions,
    pools: BTreeMap<Kind, Pool>,
    down: Downstream,
    down_extended: Downstream,
    /// Session indexes of the bystander and the downstreams, and how they stood at the start.
    steady: Vec<(usize, SessionStatus)>,
    _bystander: RawPeer,
}

fn listen() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.90:0").unwrap();
    l.local_addr().unwrap()
}

fn v4(a: [u8; 4]) -> Prefix {
    Prefix::v4(Ipv4Addr::from(a), 24).unwrap()
}

/// The capabilities a scripted peer of this kind opens with.
fn open_caps(kind: Kind, asn: u32) -> Vec<Capability> {
    let mut caps = vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::Multiprotocol { afi: 2, safi: 1 },
    ];
    if kind != Kind::TwoOctet {
        caps.push(Capability::FourOctetAs(asn));
    }
    match kind {
        Kind::AddPath => caps.push(Capability::AddPath(
            [1, 2]
                .map(|afi| AddPathFamily {
                    afi,
                    safi: 1,
                    send_receive: 2,
                })
                .to_vec(),
        )),
        Kind::Extended => caps.push(Capability::ExtendedMessage),
        _ => {}
    }
    caps
}

/// A connection that ribshard has answered with its OPEN; tried again while the session is
/// in its idle hold after an earlier case.
async fn connect(addr: IpAddr, listen: SocketAddr) -> RawPeer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut p = RawPeer::connect(addr, listen).await;
        let first = tokio::time::timeout(Duration::from_secs(3), p.recv()).await;
        if let Ok(Some(m)) = first {
            if matches!(decode(&m, &SessionParams::default()), Ok(Message::Open(_))) {
                return p;
            }
        }
        assert!(Instant::now() < deadline, "{addr} never got an OPEN");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A connection through OPEN and KEEPALIVE both ways, hold time 0 (no keepalives needed).
async fn establish(addr: IpAddr, asn: u32, kind: Kind, listen: SocketAddr) -> RawPeer {
    let mut p = connect(addr, listen).await;
    let open = Open::new(asn, 0, Ipv4Addr::new(10, 0, 0, 2), open_caps(kind, asn));
    p.send(&open.encode()).await;
    let m = p.recv().await.expect("KEEPALIVE from ribshard");
    assert!(
        matches!(
            decode(&m, &SessionParams::default()),
            Ok(Message::Keepalive)
        ),
        "{addr}: expected a KEEPALIVE, got {m:?}"
    );
    p.send(&ribshard_wire::keepalive()).await;
    p
}

impl World {
    async fn start() -> World {
        let listen = listen();
        let mut peers = Vec::new();
        let mut pools = BTreeMap::new();
        for kind in KINDS {
            let (third, first_as, n) = pool_addresses(kind);
            let mut pool = Pool {
                peers: Vec::new(),
                next: 0,
            };
            for i in 0..n {
                let addr = [127, 0, third, 1 + i as u8];
                let asn = if kind == Kind::Ibgp {
                    LOCAL_AS
                } else {
                    first_as + i as u32
                };
                pool.peers.push(Slot {
                    addr: IpAddr::from(addr),
                    asn,
                    index: peers.len(),
                    conn: None,
                });
                peers.push(settings(addr, asn, Some(kind)));
            }
            pools.insert(kind, pool);
        }
        let steady_at = peers.len();
        peers.push(settings(BYSTANDER.0, BYSTANDER.1, Some(Kind::Ebgp)));
        peers.push(settings(DOWN.0, DOWN.1, None));
        peers.push(settings(DOWN_EXTENDED.0, DOWN_EXTENDED.1, None));
        let (pipeline, sessions) = harness::start(2, 2, Default::default(), peers, listen).await;

        let mut bystander =
            establish(IpAddr::from(BYSTANDER.0), BYSTANDER.1, Kind::Ebgp, listen).await;
        let ctx = Ctx {
            asn: BYSTANDER.1,
            kind: Kind::Ebgp,
            index: 0,
        };
        bystander
            .send(&bytes::update(&[], &ctx.base(), &[24, 192, 0, 2]))
            .await;
        let down = Downstream::start(
            establish(IpAddr::from(DOWN.0), DOWN.1, Kind::Ebgp, listen).await,
            false,
        );
        let down_extended = Downstream::start(
            establish(
                IpAddr::from(DOWN_EXTENDED.0),
                DOWN_EXTENDED.1,
                Kind::Extended,
                listen,
            )
            .await,
            true,
        );
        for d in [&down, &down_extended] {
            d.wait("the bystander's route", |t| {
                t.contains_key(&v4(BYSTANDER_PREFIX))
            })
            .await
            .unwrap();
        }
        let steady = (steady_at..steady_at + 3)
            .map(|i| (i, sessions.peers[i].status()))
            .collect();
        World {
            listen,
            pipeline,
            sessions,
            pools,
            down,
            down_extended,
            steady,
            _bystander: bystander,
        }
    }

    /// The Loc-RIB's active path for a prefix, as `show route` finds it.
    async fn shown(&self, p: Prefix) -> Option<PathAttributes> {
        let f = match p {
            Prefix::V4 { .. } => Family::Ipv4Unicast,
            Prefix::V6 { .. } => Family::Ipv6Unicast,
        };
        let q = RouteQuery {
            select: Selection::Exact(p),
            ..RouteQuery::whole_table(f)
        };
        let routes = self
            .pipeline
            .walk_routes(q, None)
            .next()
            .await
            .expect("the pipeline answers");
        routes
            .into_iter()
            .flat_map(|r| r.view.paths)
            .find(|p| matches!(p.state, PathState::Active { .. }))
            .map(|p| p.path.attrs.attributes())
    }

    /// Runs one case; an error says what went wrong.
    async fn run(&mut self, n: u16, case: &Case) -> Result<(), String> {
        let listen = self.listen;
        let pool = self.pools.get_mut(&case.kind).unwrap();
        let slot_at = pool.next;
        pool.next = (pool.next + 1) % pool.peers.len();
        let slot = &mut pool.peers[slot_at];
        let ctx = Ctx {
            asn: slot.asn,
            kind: case.kind,
            index: n,
        };
        let (msg, expect) = (case.build)(&ctx);
        let prefix = if case.v6 { ctx.prefix6() } else { ctx.prefix() };
        let session = slot.index;
        if case.phase != Phase::Established {
            let mut conn = connect(slot.addr, listen).await;
            if case.phase == Phase::OpenConfirm {
                conn.send(&ctx.open(&bytes::caps_param(&ctx.good_caps())))
                    .await;
                let m = conn.recv().await.ok_or("no KEEPALIVE after our OPEN")?;
                if m.get(18) != Some(&4) {
                    return Err(format!("expected a KEEPALIVE, got {m:?}"));
                }
            }
            conn.send(&msg).await;
            return match expect {
                Expect::Up => {
                    let m = conn.recv().await.ok_or("closed instead of a KEEPALIVE")?;
                    if m.get(18) != Some(&4) {
                        return Err(format!("OPEN refused: {m:?}"));
                    }
                    Ok(())
                }
                Expect::Reset {
                    code,
                    subcode,
                    data,
                } => expect_notification(&mut conn, code, subcode, data).await,
                Expect::Closed => expect_closed(&mut conn).await,
                _ => Err("a case before Established ends in a reset or a session".into()),
            };
        }

        if slot.conn.is_none() {
            slot.conn = Some(establish(slot.addr, slot.asn, case.kind, listen).await);
        }
        let conn = slot.conn.as_mut().unwrap();
        let good = if case.v6 {
            ctx.announce6(ctx.base())
        } else {
            ctx.announce(ctx.base())
        };
        conn.send(&good).await;
        for d in [&self.down, &self.down_extended] {
            d.wait("the good announcement", |t| t.contains_key(&prefix))
                .await?;
        }
        let good_attrs = self.down.current(&prefix).unwrap();
        let log_from = self.down.log_len();
        let before = self.sessions.peers[session].status();
        conn.send(&msg).await;

        match &expect {
            Expect::Reset {
                code,
                subcode,
                data,
            } => {
                let mut conn = slot.conn.take().unwrap();
                expect_notification(&mut conn, *code, *subcode, data.clone()).await?;
            }
            Expect::Closed => {
                let mut conn = slot.conn.take().unwrap();
                expect_closed(&mut conn).await?;
            }
            _ => {
                // A marker after the case: once it is downstream, so is the case's effect.
                let marker = Ctx {
                    index: n + 0x8000,
                    ..ctx
                };
                conn.send(&marker.announce(marker.base())).await;
                for d in [&self.down, &self.down_extended] {
                    d.wait("the marker", |t| t.contains_key(&marker.prefix()))
                        .await?;
                }
            }
        }

        // Downstream and in the Loc-RIB.
        let (at_down, at_extended, shown) = match &expect {
            Expect::Reset { .. } | Expect::Closed | Expect::Withdrawn => (false, false, false),
            Expect::Discarded(_) | Expect::Kept(_) | Expect::Up => (true, true, true),
            Expect::TooLarge { extended } => (false, *extended, true),
        };
        for (d, want) in [(&self.down, at_down), (&self.down_extended, at_extended)] {
            d.wait(if want { "the route" } else { "its withdrawal" }, |t| {
                t.contains_key(&prefix) == want
            })
            .await?;
        }
        if matches!(expect, Expect::Withdrawn | Expect::Reset { .. }) {
            // Nothing but the good announcement ever went downstream.
            let wrong = self.down.announced_since(log_from, &prefix, &good_attrs);
            if !wrong.is_empty() {
                return Err(format!("announced downstream: {wrong:?}"));
            }
        }
        let in_rib = self.shown(prefix).await;
        if in_rib.is_some() != shown {
            return Err(format!("show route {prefix}: {in_rib:?}"));
        }
        match (&expect, &in_rib) {
            (Expect::Discarded(code), Some(a)) if a.get(*code).is_some() => {
                return Err(format!("attribute {code} kept: {a:?}"));
            }
            (Expect::Kept(Some(check)), Some(a)) => check(a)?,
            _ => {}
        }
        if matches!(expect, Expect::Reset { .. } | Expect::Closed) {
            return Ok(());
        }
        // The session stays up, and sent no NOTIFICATION.
        let st = self.sessions.peers[session].status();
        let sent = |s: &SessionStatus| s.last_sent.as_ref().map(|n| n.at);
        if st.state != State::Established
            || st.established_transitions != before.established_transitions
            || sent(&st) != sent(&before)
        {
            return Err(format!(
                "session moved: {:?}, sent {:?}",
                st.state, st.last_sent
            ));
        }
        Ok(())
    }

    /// No other session moved, the bystander's route is still downstream, and nothing a
    /// downstream received failed to decode.
    fn check_steady(&self) -> Result<(), String> {
        for (i, before) in &self.steady {
            let now = self.sessions.peers[*i].status();
            if now.state != State::Established
                || now.since != before.since
                || now.established_transitions != before.established_transitions
                || now.last_error.is_some()
            {
                return Err(format!("session {i} moved: {:?}", now.last_error));
            }
        }
        for d in [&self.down, &self.down_extended] {
            d.check()?;
            if d.current(&v4(BYSTANDER_PREFIX)).is_none() {
                return Err("the bystander's route was lost downstream".into());
            }
        }
        Ok(())
    }
}

async fn expect_notification(
    conn: &mut RawPeer,
    code: u8,
    subcode: u8,
    data: Vec<u8>,
) -> Result<(), String> {
    let want = Notification::new(code, subcode, data).encode();
    loop {
        let Some(m) = conn.recv().await else {
            return Err(format!("closed without the NOTIFICATION {code}/{subcode}"));
        };
        if m.get(18) == Some(&3) {
            if m != want {
                return Err(format!(
                    "NOTIFICATION {:?}, expected {:?}",
                    &m[19..],
                    &want[19..]
                ));
            }
            break;
        }
    }
    match conn.recv().await {
        None => Ok(()),
        Some(m) => Err(format!("a message after the NOTIFICATION: {m:?}")),
    }
}

async fn expect_closed(conn: &mut RawPeer) -> Result<(), String> {
    while let Some(m) = conn.recv().await {
        if m.get(18) == Some(&3) {
            return Err(format!("answered a NOTIFICATION with one: {:?}", &m[19..]));
        }
    }
    Ok(())
}

fn all_cases() -> Vec<Case> {
    let mut v = cases_session::cases();
    v.extend(cases_attributes::cases());
    v.extend(cases_families::cases());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_over_live_sessions() {
    let cases = all_cases();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    let mut world = Box::pin(World::start()).await;
    let mut failed = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let n = i as u16 + 1;
        let outcome = match Box::pin(world.run(n, case)).await {
            Ok(()) => world.check_steady(),
            e => e,
        };
        if let Err(e) = outcome {
            failed.push(format!("{n} {}: {e}", case.name));
        }
        // `show` still answers.
        assert!(world.shown(v4(BYSTANDER_PREFIX)).await.is_some());
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    harness::stop(world.pipeline, world.sessions).await;
}
