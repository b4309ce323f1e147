//! Configuration reload (SIGHUP): what differs between the running configuration and the
//! file, what is applied with every session kept up, and what waits for a restart.
//!
//! Applied live today: `rib-sharding.number-of-shards` and `update-threading.number-of-threads`
//! (the pipeline re-shards; Junos restarts its routing daemon for this). Everything else that
//! changed is named in the log as waiting for a restart, never half applied.

use crate::config::{Config, Peer};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What a reload does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New (shards, update threads) as the pipeline runs them, when they change.
    pub threading: Option<(usize, usize)>,
    /// Changes that take effect only at the next start, in words an operator can act on.
    pub needs_restart: Vec<String>,
}

/// (shards, update threads) as the pipeline runs them: 0 shards is one RIB thread, and
/// without update threads there is one shard.
pub fn threads_of(c: &Config) -> (usize, usize) {
    let u = c.threading.update_threads as usize;
    let s = if u == 0 {
        1
    } else {
        (c.threading.shards as usize).max(1)
    };
    (s, u)
}

/// Compares the running configuration with a newly loaded one.
pub fn plan(running: &Config, new: &Config) -> Plan {
    let mut p = Plan::default();
    if threads_of(running) != threads_of(new) {
        p.threading = Some(threads_of(new));
    }
    let mut restart = |changed: bool, what: &str| {
        if changed {
            p.needs_restart.push(what.to_string());
        }
    };
    restart(running.local_as != new.local_as, "bgp.local-as");
    restart(running.router_id != new.router_id, "bgp.router-id");
    restart(running.listen != new.listen, "bgp.listen");
    restart(
        running.path_selection != new.path_selection,
        "bgp.path-selection / bgp.multipath",
    );
    restart(
        running.threading.write_queue_high_water != new.threading.write_queue_high_water,
        "bgp.update-threading.write-queue-high-water",
    );
    let by_address = |c: &Config| -> BTreeMap<(IpAddr, u16), usize> {
        c.peers
            .iter()
            .enumerate()
            .map(|(i, n)| ((n.address, n.port), i))
            .collect()
    };
    let (old, now) = (by_address(running), by_address(new));
    for (key, &i) in &now {
        match old.get(key) {
            None => p.needs_restart.push(format!("neighbor {} added", key.0)),
            Some(&j) if !same_neighbor(running.peers.get(j), new.peers.get(i)) => {
                p.needs_restart.push(format!("neighbor {} changed", key.0));
            }
            Some(_) => {}
        }
    }
    for key in old.keys().filter(|k| !now.contains_key(k)) {
        p.needs_restart.push(format!("neighbor {} removed", key.0));
    }
    p
}

/// Whether two neighbor definitions say the same; where they are written (`key`) may move.
fn same_neighbor(a: Option<&Peer>, b: Option<&Peer>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            Peer {
                key: b.key.clone(),
                ..a.clone()
            } == *b
        }
        _ => a.is_none() && b.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    fn config(shards: u32, threads: u32, extra: &str, neighbors: &[&str]) -> Config {
        let mut text = format!(
            "[bgp]\nlocal-as = 65000\nrouter-id = \"192.0.2.1\"\n\
             [bgp.rib-sharding]\nnumber-of-shards = {shards}\n\
             [bgp.update-threading]\nnumber-of-threads = {threads}\n{extra}\n\
             [[bgp.group]]\nname = \"peers\"\ntype = \"external\"\npeer-as = 65001\n\
             import = [\"accept\"]\nexport = [\"accept\"]\n"
        );
        for n in neighbors {
            text += &format!("[[bgp.group.neighbor]]\naddress = \"{n}\"\n");
        }
        parse(&text, Path::new("test.toml")).unwrap()
    }

    #[test]
    fn threading_is_applied_live_and_the_rest_named() {
        let a = config(2, 2, "", &["127.0.0.2", "127.0.0.3"]);
        assert_eq!(plan(&a, &a), Plan::default());
        let b = config(4, 3, "", &["127.0.0.2", "127.0.0.3"]);
        assert_eq!(
            plan(&a, &b),
            Plan {
                threading: Some((4, 3)),
                needs_restart: vec![],
            }
        );
        // No update threads: one shard, whatever number-of-shards says.
        let single = config(0, 0, "", &["127.0.0.2", "127.0.0.3"]);
        let one = config(1, 0, "", &["127.0.0.2", "127.0.0.3"]);
        assert_eq!(plan(&a, &single).threading, Some((1, 0)));
        assert_eq!(plan(&single, &one), Plan::default());
        let c = config(
            2,
            2,
            "[bgp.path-selection]\nalways-compare-med = true\n",
            &["127.0.0.3", "127.0.0.4"],
        );
        assert_eq!(
            plan(&a, &c),
            Plan {
                threading: None,
                needs_restart: vec![
                    "bgp.path-selection / bgp.multipath".into(),
                    "neighbor 127.0.0.4 added".into(),
                    "neighbor 127.0.0.2 removed".into(),
                ],
            }
        );
    }
}
