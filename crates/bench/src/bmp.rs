//! `--bmp`: a BMP monitoring station beside the run (ribshard `[[bmp.station]]` with the
//! pre-policy Adj-RIB-In and the Loc-RIB, or one named feed: the post-policy Adj-RIB-In or
//! the Adj-RIB-Out too): it reads as fast as the DUT writes and counts what it gets, so the
//! run shows what the feed costs the DUT and when the station holds the whole table. BMP's framing and the UPDATEs' prefixes are read here (RFC 7854 section
//! 4, RFC 4271 and 4760), not with ribshard's code.

use crate::speaker::now_ns;
use hashbrown::HashSet;
use std::io::{BufReader, Read};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the station got so far.
#[derive(Default)]
pub struct Counts {
    pub messages: AtomicU64,
    pub octets: AtomicU64,
    /// Route Monitoring of the neighbors' Adj-RIB-In (pre-policy).
    pub adj_rib_in: AtomicU64,
    /// Route Monitoring of the neighbors' Adj-RIB-In after import policy (the L flag), and
    /// the paths it announced.
    pub post_policy: AtomicU64,
    pub post_policy_paths: AtomicU64,
    /// Route Monitoring of what the neighbors are sent (the O flag), and the prefixes the
    /// station holds for them.
    pub adj_rib_out: AtomicU64,
    pub adj_rib_out_prefixes: AtomicU64,
    /// When the last Route Monitoring of the post-policy or Adj-RIB-Out table came.
    pub last_table_ns: AtomicU64,
    /// Route Monitoring of the Loc-RIB.
    pub loc_rib: AtomicU64,
    /// Prefixes the station holds in the Loc-RIB (announced and not withdrawn).
    pub loc_rib_prefixes: AtomicU64,
    /// When the last Loc-RIB Route Monitoring came ([`now_ns`]).
    pub last_loc_rib_ns: AtomicU64,
    pub connections: AtomicU64,
}

/// Which of ribshard's feeds the station asks for.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Feeds {
    Both,
    PrePolicy,
    LocRib,
    PostPolicy,
    AdjRibOut,
}

pub struct Station {
    pub port: u16,
    pub counts: Arc<Counts>,
}

impl Station {
    pub fn start() -> std::io::Result<Station> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        std::thread::Builder::new()
            .name("bmp-station".into())
            .spawn(move || {
                // A station runs on a machine of its own: here its reading yields to the
                // DUT's routing, as the DUT's monitor thread does.
                crate::as_another_machine();
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { return };
                    c.connections.fetch_add(1, Ordering::Relaxed);
                    read(BufReader::with_capacity(1 << 20, conn), &c);
                }
            })?;
        Ok(Station { port, counts })
    }

    /// ribshard's configuration for this station.
    pub fn ribshard_config(&self, feeds: Feeds) -> String {
        let ribs = match feeds {
            Feeds::Both => "\"pre-policy\", \"loc-rib\"",
            Feeds::PrePolicy => "\"pre-policy\"",
            Feeds::LocRib => "\"loc-rib\"",
            Feeds::PostPolicy => "\"post-policy\"",
            Feeds::AdjRibOut => "\"adj-rib-out\"",
        };
        format!(
            "\n[[bmp.station]]\nname = \"bench\"\naddress = \"127.0.0.1\"\nport = {}\n\
             route-monitoring = [{ribs}]\nstatistics-timeout = 0\n",
            self.port
        )
    }
}

/// The prefixes a station holds: IPv4 up to /24 as bits (a hash set's lookups cost the
/// station, which shares the cores with the DUT here, more than the DUT's feed), the
/// others in a set.
struct Held {
    bits: Vec<u64>,
    other: HashSet<[u8; 18]>,
    count: u64,
}

impl Held {
    fn new() -> Held {
        Held {
            bits: vec![0; (1 << 25) / 64],
            other: HashSet::new(),
            count: 0,
        }
    }

    fn set(&mut self, key: [u8; 18], on: bool) {
        let (v6, len) = (key[0] == 1, key[1]);
        if v6 || len > 24 {
            let changed = if on {
                self.other.insert(key)
            } else {
                self.other.remove(&key)
            };
            if changed {
                self.count = if on { self.count + 1 } else { self.count - 1 };
            }
            return;
        }
        let addr = u32::from_be_bytes([key[2], key[3], key[4], key[5]]);
        let at = (1usize << len)
            + if len == 0 {
                0
            } else {
                (addr >> (32 - len)) as usize
            };
        let (word, bit) = (at / 64, 1u64 << (at % 64));
        let Some(w) = self.bits.get_mut(word) else {
            return;
        };
        if (*w & bit != 0) != on {
            *w ^= bit;
            self.count = if on { self.count + 1 } else { self.count - 1 };
        }
    }
}

/// Reads one connection to its end.
fn read(mut r: impl Read, c: &Counts) {
    let mut loc_rib = Held::new();
    // The bench's Adj-RIB-Out is one downstream's: its prefixes, as the Loc-RIB's.
    let mut adj_rib_out = Held::new();
    let mut header = [0u8; 6];
    let mut body = Vec::new();
    while r.read_exact(&mut header).is_ok() {
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        body.resize(len.saturating_sub(6), 0);
        if r.read_exact(&mut body).is_err() {
            return;
        }
        c.messages.fetch_add(1, Ordering::Relaxed);
        c.octets.fetch_add(len as u64, Ordering::Relaxed);
        // Route Monitoring: the per-peer header (42 octets), then one UPDATE.
        if header[5] != 0 || body.len() < 42 + 19 {
            continue;
        }
        // The per-peer header's flags (RFC 7854 section 4.2, RFC 8671): L, O.
        let (post, out) = (body[1] & 0x40 != 0, body[1] & 0x10 != 0);
        if body[0] != 3 && out {
            c.adj_rib_out.fetch_add(1, Ordering::Relaxed);
            let _ = prefixes(&body[42 + 19..], |withdrawn, key| {
                adj_rib_out.set(key, !withdrawn)
            });
            c.adj_rib_out_prefixes
                .store(adj_rib_out.count, Ordering::Relaxed);
            c.last_table_ns.store(now_ns(), Ordering::Relaxed);
            continue;
        }
        if body[0] != 3 && post {
            c.post_policy.fetch_add(1, Ordering::Relaxed);
            let mut paths = 0;
            let _ = prefixes(&body[42 + 19..], |withdrawn, _| {
                paths += u64::from(!withdrawn);
            });
            c.post_policy_paths.fetch_add(paths, Ordering::Relaxed);
            c.last_table_ns.store(now_ns(), Ordering::Relaxed);
            continue;
        }
        if body[0] != 3 {
            c.adj_rib_in.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        c.loc_rib.fetch_add(1, Ordering::Relaxed);
        let _ = prefixes(&body[42 + 19..], |withdrawn, key| {
            loc_rib.set(key, !withdrawn)
        });
        c.loc_rib_prefixes.store(loc_rib.count, Ordering::Relaxed);
        c.last_loc_rib_ns.store(now_ns(), Ordering::Relaxed);
    }
}

/// Calls `f` with each prefix of an UPDATE body (withdrawn or announced, and a key: the
/// family, the length and the address octets); `None` if it is cut short. No Add-Path.
fn prefixes(body: &[u8], mut f: impl FnMut(bool, [u8; 18])) -> Option<()> {
    let u16_at = |b: &[u8], i: usize| -> Option<usize> {
        Some(usize::from(u16::from_be_bytes([
            *b.get(i)?,
            *b.get(i + 1)?,
        ])))
    };
    let nlri = |bytes: &[u8], v6: bool, withdrawn: bool, f: &mut dyn FnMut(bool, [u8; 18])| {
        let mut at = 0;
        while let Some(&len) = bytes.get(at) {
            let n = usize::from(len).div_ceil(8);
            let Some(addr) = bytes.get(at + 1..at + 1 + n) else {
                return;
            };
            let mut key = [0u8; 18];
            key[0] = u8::from(v6);
            key[1] = len;
            if let Some(k) = key.get_mut(2..2 + n.min(16)) {
                k.copy_from_slice(&addr[..n.min(16)]);
            }
            f(withdrawn, key);
            at += 1 + n;
        }
    };
    let wlen = u16_at(body, 0)?;
    nlri(body.get(2..2 + wlen)?, false, true, &mut f);
    let alen = u16_at(body, 2 + wlen)?;
    let attrs = body.get(4 + wlen..4 + wlen + alen)?;
    nlri(body.get(4 + wlen + alen..)?, false, false, &mut f);
    let mut at = 0;
    while at + 3 <= attrs.len() {
        let (flags, code) = (attrs[at], attrs[at + 1]);
        let (vlen, hdr) = if flags & 0x10 != 0 {
            (u16_at(attrs, at + 2)?, 4)
        } else {
            (usize::from(attrs[at + 2]), 3)
        };
        let v = attrs.get(at + hdr..at + hdr + vlen)?;
        match code {
            // MP_REACH_NLRI: AFI, SAFI, next hop, a reserved octet, NLRI.
            14 => {
                let nh = usize::from(*v.get(3)?);
                nlri(v.get(5 + nh..)?, v.get(1) == Some(&2), false, &mut f);
            }
            // MP_UNREACH_NLRI: AFI, SAFI, NLRI.
            15 => nlri(v.get(3..)?, v.get(1) == Some(&2), true, &mut f),
            _ => {}
        }
        at += hdr + vlen;
    }
    Some(())
}
