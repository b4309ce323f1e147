//! A downstream peer that reads everything ribshard sends it: the table it holds, every
//! announcement in order, and any message it could not take.

use crate::common::rawpeer::RawPeer;
use ribshard_wire::attributes::PathAttributes;
use ribshard_wire::message::MAX_MESSAGE_LEN;
use ribshard_wire::{decode, frame, Action, Message, Prefix, SessionParams};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

#[derive(Default)]
struct Seen {
    table: BTreeMap<Prefix, PathAttributes>,
    /// Every change in order: an announcement's attributes, or `None` for a withdrawal.
    log: Vec<(Prefix, Option<PathAttributes>)>,
    /// Messages a peer of this kind could not take, and the reason.
    errors: Vec<String>,
}

pub struct Downstream {
    seen: Arc<Mutex<Seen>>,
}

impl Downstream {
    /// Reads the established `peer` until the connection closes; `extended`: it negotiated
    /// extended messages.
    pub fn start(peer: RawPeer, extended: bool) -> Downstream {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let params = SessionParams {
            four_octet_as: true,
            extended_message: extended,
            ..SessionParams::default()
        };
        let max = if extended { 65535 } else { MAX_MESSAGE_LEN };
        let (mut s, mut buf) = peer.into_parts();
        let into = seen.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                loop {
                    let len = match frame(&buf, max) {
                        Ok(Some(len)) => len,
                        Ok(None) => break,
                        Err(e) => {
                            into.lock().unwrap().errors.push(format!("framing: {e}"));
                            return;
                        }
                    };
                    let m: Vec<u8> = buf.drain(..len).collect();
                    take(&mut into.lock().unwrap(), &m, &params);
                }
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => {
                        into.lock().unwrap().errors.push("connection closed".into());
                        return;
                    }
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        });
        Downstream { seen }
    }

    /// Waits up to 10 s for the table to satisfy `f`.
    pub async fn wait(
        &self,
        what: &str,
        f: impl Fn(&BTreeMap<Prefix, PathAttributes>) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if f(&self.seen.lock().unwrap().table) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("downstream never saw {what}"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub fn current(&self, p: &Prefix) -> Option<PathAttributes> {
        self.seen.lock().unwrap().table.get(p).cloned()
    }

    pub fn log_len(&self) -> usize {
        self.seen.lock().unwrap().log.len()
    }

    /// Announcements of `p` since log entry `from` with other attributes than `good`.
    pub fn announced_since(
        &self,
        from: usize,
        p: &Prefix,
        good: &PathAttributes,
    ) -> Vec<PathAttributes> {
        let s = self.seen.lock().unwrap();
        s.log
            .iter()
            .skip(from)
            .filter(|(q, _)| q == p)
            .filter_map(|(_, a)| a.clone())
            .filter(|a| a != good)
            .collect()
    }

    /// Everything received was a message this peer can take.
    pub fn check(&self) -> Result<(), String> {
        let s = self.seen.lock().unwrap();
        match s.errors.first() {
            None => Ok(()),
            Some(e) => Err(format!("downstream: {e}")),
        }
    }
}

fn take(s: &mut Seen, m: &[u8], params: &SessionParams) {
    let u = match decode(m, params) {
        Ok(Message::Update(u)) => u,
        Ok(Message::Keepalive) => return,
        Ok(other) => {
            s.errors.push(format!("unexpected {other:?}"));
            return;
        }
        Err(e) => {
            s.errors.push(format!("undecodable: {e}"));
            return;
        }
    };
    if u.action() != Action::Accept {
        s.errors.push(format!("malformed UPDATE sent: {u:?}"));
        return;
    }
    for n in u.withdrawn_all() {
        s.table.remove(&n.prefix);
        s.log.push((n.prefix, None));
    }
    let a = PathAttributes::from_view(&u.attrs, params);
    for n in u.announced() {
        s.table.insert(n.prefix, a.clone());
        s.log.push((n.prefix, Some(a.clone())));
    }
}
