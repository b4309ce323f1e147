//! Handing what a session received on to the tap (the MRT dump of received messages, tests)
//! as room appears; what goes to the pipeline waits in the session's
//! [`crate::pipeline::Inlet`] and goes through [`crate::pipeline::Pipeline::deliver`]. The
//! session stops reading its socket while either waits (backpressure).

use super::Inbound;
use std::collections::VecDeque;
use tokio::sync::mpsc;

/// Delivers the oldest tapped item once the tap has room; never returns while there is
/// none. Cancel-safe: the item leaves `tapped` only with a reserved slot.
pub(super) async fn deliver_tapped(
    tapped: &mut VecDeque<Inbound>,
    tap: &Option<mpsc::Sender<Inbound>>,
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
        p.send(m);
    } else {
        tapped.pop_front();
    }
}
