//! The management socket flooded by 100 clients at once, while a BIRD 2 neighbor with a 3 s
//! hold time keeps its session and its routes keep flowing: every client gets its answers,
//! the session never drops, and a route BIRD adds during the flood arrives.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CLIENTS: usize = 100;

fn bird_config(port_r: u16, port_b: u16, second: bool) -> String {
    format!(
        r#"router id 127.0.0.44;
log "DIR/bird.log" all;
protocol device {{}}
protocol static s4 {{ ipv4; route 203.0.113.0/24 blackhole; {} }}
protocol bgp ribsh {{
  local 127.0.0.44 port {port_b} as 65044;
  neighbor 127.0.0.40 port {port_r} as 65040;
  multihop; strict bind on; hold time 3; connect retry time 2;
  ipv4 {{ import all; export all; next hop address 198.51.100.44; }};
}}
"#,
        if second {
            "route 198.18.0.0/15 blackhole;"
        } else {
            ""
        }
    )
}

/// One HTTP/1.1 request over the management socket; the status line and the body.
fn get(sock: &Path, path: &str) -> std::io::Result<(String, String)> {
    let mut s = UnixStream::connect(sock)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: ribshard\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out.lines().next().unwrap_or_default().to_string();
    Ok((status, out))
}

#[test]
fn a_hundred_management_clients_at_once_leave_routing_alone() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("mgmt-flood");
    let (port_r, port_b) = (free_port("0.0.0.0"), free_port("0.0.0.0"));
    let (_rs, dump) = ribshard(
        &dir,
        &ribshard_config(port_r, "127.0.0.44", 65044, port_b, "hold-time = 3", true),
    );
    let bird = Bird::start(&dir, &bird_config(port_r, port_b, false));
    let first = prefix("203.0.113.0/24");
    assert!(
        wait(20, || read_dump(&dump).0.contains_key(&first)),
        "{}",
        bird.cmd("show protocols all ribsh")
    );
    let sock = socket(&dir);

    // The flood: each client asks again as soon as it has its answer, for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let paths = [
        "/v1/bgp/summary",
        "/v1/bgp/neighbors",
        "/v1/routes?format=text",
        "/v1/routes/summary",
        "/metrics",
    ];
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (sock, stop) = (sock.clone(), stop.clone());
            let (answered, failed) = (answered.clone(), failed.clone());
            let path = paths[i % paths.len()];
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match get(&sock, path) {
                        Ok((status, _)) if status.contains(" 200 ") => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        other => {
                            eprintln!("{path}: {other:?}");
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();

    // Meanwhile BIRD announces another route, and the session outlives two hold times.
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(
        dir.join("bird.conf"),
        bird_config(port_r, port_b, true).replace("DIR", dir.to_str().unwrap()),
    )
    .unwrap();
    bird.cmd("configure");
    let second = prefix("198.18.0.0/15");
    let arrived = wait(20, || read_dump(&dump).0.contains_key(&second));
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }

    assert!(arrived, "the route BIRD added during the flood never came");
    let (answered, failed) = (
        answered.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    assert_eq!(failed, 0, "{failed} requests failed, {answered} answered");
    assert!(answered >= CLIENTS as u64, "{answered} answers");
    let (_, neighbors) = get(&sock, "/v1/bgp/neighbors").unwrap();
    assert!(
        neighbors.contains("\"established_transitions\":1"),
        "{neighbors}"
    );
    assert!(bird.established("ribsh"));
    eprintln!("{answered} answers to {CLIENTS} clients");
}
