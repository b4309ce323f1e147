//! MRT RIBs injected into the running daemon (`[mrt] inject`, `ribshard mrt inject`): each
//! peer of a TABLE_DUMP_V2 file's PEER_INDEX_TABLE enters the pipeline as a neighbor (a
//! [`LocalSource`] under a peer index reserved among the sessions'), with its own address,
//! AS and BGP identifier, and each of its RIB entries as a path: a lab's or a looking
//! glass's table without the peers. Their routes are never installed in the kernel. Removing
//! an injection withdraws them all.

use ribshard_engine::local::LocalSource;
use ribshard_engine::pipeline::Pipeline;
use ribshard_mrt::{MrtError, Record};
use ribshard_rib::attrs::next_hop_of;
use ribshard_rib::{Interner, LoopChecks, PeerInfo};
use ribshard_wire::{parse_attributes_only, Family, Nlri};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One injected file: its peers' sources hold its routes until it is removed.
pub struct Injection {
    pub file: PathBuf,
    /// Per MRT peer: its peer index here, address and AS.
    pub peers: Vec<(u32, std::net::IpAddr, u32)>,
    pub routes: u64,
    /// RIB entries skipped: attributes that do not parse, a peer the table lacks.
    pub skipped: u64,
    sources: Vec<LocalSource>,
}

impl Injection {
    /// Withdraws every route of the file.
    pub fn remove(mut self) {
        for s in self.sources.iter_mut() {
            s.down();
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("{0}")]
    Mrt(#[from] MrtError),
    #[error("{0}: not a TABLE_DUMP_V2 RIB (no PEER_INDEX_TABLE first)")]
    NotARib(String),
}

/// The PEER_INDEX_TABLE of a file (its first record).
pub fn peers_of(file: &Path) -> Result<ribshard_mrt::PeerIndexTable, InjectError> {
    let mut r = ribshard_mrt::open(file)?;
    while let Some(raw) = r.next_record()? {
        if let Record::PeerIndexTable(t) = Record::parse(&raw)? {
            return Ok(t);
        }
    }
    Err(InjectError::NotARib(file.display().to_string()))
}

/// Reads `file` into the pipeline: `indexes[i]` is the peer index reserved for MRT peer `i`
/// of `table`. Blocking (a full table takes a second or so).
pub fn inject(
    pipeline: Arc<Pipeline>,
    file: &Path,
    table: &ribshard_mrt::PeerIndexTable,
    indexes: &[u32],
    local_as: u32,
    router_id: std::net::Ipv4Addr,
) -> Result<Injection, InjectError> {
    let mut sources: Vec<LocalSource> = table
        .peers
        .iter()
        .zip(indexes)
        .map(|(p, i)| {
            let info = PeerInfo {
                ebgp: p.asn != local_as,
                router_id: u32::from(p.bgp_id),
                address: match p.address {
                    std::net::IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
                    std::net::IpAddr::V6(a) => u128::from(a),
                },
                local_as,
                peer_as: p.asn,
                rr_cluster: None,
                rs_client: false,
            };
            LocalSource::up(pipeline.clone(), *i, info)
        })
        .collect();
    let mut interner = Interner::new(LoopChecks {
        local_as,
        loops: 1,
        router_id: u32::from(router_id),
        ..LoopChecks::default()
    });
    let params = ribshard_mrt::RibRecord::params();
    let (mut routes, mut skipped) = (0u64, 0u64);
    let mut r = ribshard_mrt::open(file)?;
    while let Some(raw) = r.next_record()? {
        let Ok(Record::Rib(rib)) = Record::parse(&raw) else {
            continue;
        };
        let mp = rib.prefix.family() != Family::Ipv4Unicast;
        for e in &rib.entries {
            let Ok(parsed) = parse_attributes_only(e.attributes, &params) else {
                skipped += 1;
                continue;
            };
            let Some(source) = sources.get_mut(usize::from(e.peer_index)) else {
                skipped += 1;
                continue;
            };
            let nh = next_hop_of(&parsed.attrs, mp);
            let attrs = interner.intern(&parsed.attrs, &params, nh);
            source.announce(
                &attrs,
                Nlri {
                    prefix: rib.prefix,
                    path_id: e.path_id,
                },
            );
            routes += 1;
        }
    }
    for s in sources.iter_mut() {
        s.flush();
    }
    Ok(Injection {
        file: file.to_path_buf(),
        peers: table
            .peers
            .iter()
            .zip(indexes)
            .map(|(p, i)| (*i, p.address, p.asn))
            .collect(),
        routes,
        skipped,
        sources,
    })
}

/// What an injection holds, for the API.
#[derive(Clone, Debug)]
pub struct Injected {
    pub file: PathBuf,
    pub peers: Vec<(u32, std::net::IpAddr, u32)>,
    pub routes: u64,
    pub skipped: u64,
}

impl Injection {
    pub fn summary(&self) -> Injected {
        Injected {
            file: self.file.clone(),
            peers: self.peers.clone(),
            routes: self.routes,
            skipped: self.skipped,
        }
    }
}

impl crate::state::Daemon {
    /// Injects an MRT RIB: its peers get peer indexes, its routes enter the pipeline.
    pub async fn inject_mrt(self: &Arc<Self>, file: PathBuf) -> Result<Injected, String> {
        if self
            .injections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|i| i.file == file)
        {
            return Err(format!("{} is injected already", file.display()));
        }
        let f = file.clone();
        let table = tokio::task::spawn_blocking(move || peers_of(&f))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let (indexes, local_as, router_id) = {
            let mut live = self.live.write().await;
            let indexes: Vec<u32> = table
                .peers
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let s = crate::config::local_settings(
                        &live.config,
                        p.address,
                        p.asn,
                        format!("{} peer {i} (injected)", file.display()),
                    );
                    live.reserve(s)
                })
                .collect();
            (indexes, live.config.local_as, live.config.router_id)
        };
        {
            let f = self.forwarding();
            for i in &indexes {
                f.local_source(*i, false);
            }
        }
        let pipeline = self.pipeline.clone();
        let f = file.clone();
        let injection = tokio::task::spawn_blocking(move || {
            inject(pipeline, &f, &table, &indexes, local_as, router_id)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        let summary = injection.summary();
        tracing::info!(
            file = %file.display(),
            peers = summary.peers.len(),
            routes = summary.routes,
            skipped = summary.skipped,
            "MRT RIB injected"
        );
        self.injections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(injection);
        Ok(summary)
    }

    /// Removes an injection: its routes are withdrawn.
    pub async fn remove_mrt(self: &Arc<Self>, file: &Path) -> Option<Injected> {
        let injection = {
            let mut all = self.injections.lock().unwrap_or_else(|e| e.into_inner());
            let i = all.iter().position(|x| x.file == file)?;
            all.remove(i)
        };
        let summary = injection.summary();
        let _ = tokio::task::spawn_blocking(move || injection.remove()).await;
        let f = self.forwarding();
        for (i, _, _) in &summary.peers {
            f.local_source(*i, true);
        }
        tracing::info!(file = %file.display(), routes = summary.routes, "MRT RIB injection removed");
        Some(summary)
    }

    pub fn injected(&self) -> Vec<Injected> {
        self.injections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(Injection::summary)
            .collect()
    }
}
