//! Handing what a session received on to the tap (the BGP4MP log of received messages, BMP,
//! tests) as room appears; what goes to the pipeline waits in the session's
//! [`crate::pipeline::Inlet`] and goes through [`crate::pipeline::Pipeline::deliver`]. The
//! session stops reading its socket while either waits (backpressure).
//!
//! A tapped item goes to the tap only once what it brought to the pipeline is in the
//! pipeline's queues (its [`Tapped::mark`] is handed on): a BMP station's table dump, which
//! starts after the tap delivered some UPDATE, then walks shards that have that UPDATE's
//! routes, and the live feed after it never overtakes the walk.

use super::Inbound;
use crate::pipeline::Inlet;
use std::collections::VecDeque;
use tokio::sync::mpsc;

/// One item for the tap and the inlet position it waits for (`None`: what it brought is
/// not yet queued for the pipeline; the next hand-off to the inlet marks it).
#[derive(Debug)]
pub(super) struct Tapped {
    pub(super) item: Inbound,
    pub(super) mark: Option<u64>,
}

/// Tapped items handed to the tap per wake of the session at most.
const TAP_AT_ONCE: usize = 256;

/// How many of the oldest tapped items may go to the tap now (up to [`TAP_AT_ONCE`]).
pub(super) fn tap_ready(tapped: &VecDeque<Tapped>, inlet: &Inlet, piped: bool) -> usize {
    tapped
        .iter()
        .take(TAP_AT_ONCE)
        .take_while(|t| !piped || t.mark.is_some_and(|m| inlet.handed_on(m)))
        .count()
}

/// Delivers the oldest tapped item once the tap has room, and then as many of the next
/// `ready` as there is room for at once (one wake of the session for a batch of UPDATEs,
/// not one each); never returns while there is none. Cancel-safe: an item leaves `tapped`
/// only with a reserved slot.
pub(super) async fn deliver_tapped(
    tapped: &mut VecDeque<Tapped>,
    tap: &Option<mpsc::Sender<Inbound>>,
    ready: usize,
) {
    if tapped.is_empty() {
        return std::future::pending().await;
    }
    let permit = match tap {
        Some(t) => t.reserve().await.ok(),
        None => None,
    };
    // Without a permit the receiver is gone: the item is dropped, never retried.
    if let (Some(p), Some(m)) = (permit, tapped.pop_front()) {
        p.send(m.item);
    } else {
        tapped.pop_front();
        return;
    }
    let Some(tap) = tap else { return };
    for _ in 1..ready {
        let Ok(p) = tap.try_reserve() else { return };
        match tapped.pop_front() {
            Some(m) => p.send(m.item),
            None => return,
        }
    }
}
