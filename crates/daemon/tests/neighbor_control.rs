//! `disable` / `enable bgp neighbor` (Junos `deactivate`), `disable = true` in the file, and
//! `show configuration`, against real BIRD 2 peers.

mod common;

use common::operator::{bird_conf, bird_up, cli};
use common::*;
use ribshard_mgmt::api::{Neighbor, RunningConfig};
use std::path::Path;

fn neighbor(sock: &Path, address: &str) -> Neighbor {
    let (text, ok) = cli(sock, &["--json", "show", "bgp", "neighbor", address]);
    assert!(ok, "{text}");
    let v: Vec<Neighbor> = serde_json::from_str(&text).unwrap();
    v.into_iter().next().unwrap()
}

#[test]
fn disable_and_enable_neighbors_at_run_time_and_in_the_file() {
    if !have_bird() {
        return;
    }
    let dir = tempdir("neighbor-control");
    let port_r = free_port("127.0.0.40");
    let (port_a, port_b) = (free_port("127.0.0.41"), free_port("127.0.0.42"));
    let sock = socket(&dir);
    let extra = |b_disabled: bool| {
        format!(
            "[[bgp.group.neighbor]]\naddress = \"127.0.0.42\"\npeer-as = 65042\nport = {port_b}\n\
             local-address = \"127.0.0.40\"\nmultihop = true\npassive = true\ndisable = {b_disabled}\n\
             [[bgp.group.neighbor]]\naddress = \"127.0.0.43\"\npeer-as = 65043\npassive = true\n\
             authentication-key = \"s3cret-key\"\n"
        )
    };
    let config = |b_disabled: bool| {
        ribshard_config(
            port_r,
            "127.0.0.41",
            65041,
            port_a,
            &extra(b_disabled),
            true,
        )
    };
    let (_rs, _) = ribshard(&dir, &config(true));
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let a = Bird::start(
        &sub("a"),
        &bird_conf("127.0.0.41", 65041, port_a, port_r, &[]),
    );
    let b = Bird::start(
        &sub("b"),
        &bird_conf("127.0.0.42", 65042, port_b, port_r, &[]),
    );
    assert!(bird_up(&a, true, 30), "{}", log_of(&dir));
    // B is disabled in the file: its connections are refused, and it says so.
    assert!(
        wait(15, || log_of(&dir).contains(
            "disabled by an operator (ribshard enable bgp neighbor)"
        )),
        "{}",
        log_of(&dir)
    );
    assert!(!b.established("ribsh"));
    let nb = neighbor(&sock, "127.0.0.42");
    assert!(nb.disabled && nb.state != "Established", "{nb:?}");

    // show configuration: every neighbor resolved, the key hidden.
    let (text, ok) = cli(&sock, &["--json", "show", "configuration"]);
    assert!(ok, "{text}");
    let running: RunningConfig = serde_json::from_str(&text).unwrap();
    assert_eq!(running.bgp.local_as, 65040);
    let addrs: Vec<&str> = running
        .neighbor
        .iter()
        .map(|n| n.address.as_str())
        .collect();
    assert_eq!(addrs, ["127.0.0.41", "127.0.0.42", "127.0.0.43"]);
    assert_eq!(running.neighbor[0].peer_as, 65041);
    assert_eq!(running.neighbor[0].hold_time, 90);
    assert_eq!(running.neighbor[0].import, ["accept"]);
    assert!(running.neighbor[1].disable);
    assert_eq!(
        running.neighbor[2].authentication_key.as_deref(),
        Some("(hidden)")
    );
    let (text, ok) = cli(&sock, &["show", "configuration"]);
    assert!(ok && !text.contains("s3cret"), "{text}");
    assert!(
        text.contains("[[neighbor]]") && text.contains("authentication-key = \"(hidden)\""),
        "{text}"
    );

    // Disabled at run time: A gets a Cease / Administrative Shutdown and stays down.
    let (text, ok) = cli(&sock, &["disable", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok && text.contains("127.0.0.41: disabled"), "{text}");
    assert!(bird_up(&a, false, 10));
    let a_log = || std::fs::read_to_string(dir.join("a/bird.log")).unwrap_or_default();
    assert!(
        wait(5, || a_log().contains("Administrative shutdown")),
        "{}",
        a_log()
    );
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(!a.established("ribsh"), "A came back while disabled");
    assert!(neighbor(&sock, "127.0.0.41").disabled);
    let (text, ok) = cli(&sock, &["clear", "bgp", "neighbor", "127.0.0.41"]);
    assert!(!ok && text.contains("disabled"), "{text}");
    // Enabled: it comes back.
    let (text, ok) = cli(&sock, &["enable", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok && text.contains("127.0.0.41: enabled"), "{text}");
    assert!(bird_up(&a, true, 30), "{}", log_of(&dir));
    assert!(!neighbor(&sock, "127.0.0.41").disabled);

    // A run-time disable lasts until the next reload; the file's `disable` across it.
    let (_, ok) = cli(&sock, &["disable", "bgp", "neighbor", "127.0.0.41"]);
    assert!(ok);
    assert!(bird_up(&a, false, 10));
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok && text.contains("127.0.0.41: enabled again"), "{text}");
    assert!(bird_up(&a, true, 30), "{}", log_of(&dir));
    assert!(!b.established("ribsh"));
    // `disable` removed from the file: B comes up, A's session is kept.
    let before = a.cmd("show protocols ribsh");
    std::fs::write(dir.join("ribshard.toml"), with_socket(&dir, &config(false))).unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(ok, "{text}");
    assert!(bird_up(&b, true, 30), "{}", log_of(&dir));
    // BIRD's protocol line: name, protocol, table, state, since (to the millisecond).
    let since = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("ribsh"))
            .and_then(|l| l.split_whitespace().nth(4))
            .and_then(|t| t.split('.').next())
            .map(String::from)
    };
    assert!(a.established("ribsh"));
    assert_eq!(since(&a.cmd("show protocols ribsh")), since(&before));
    for bad in [
        vec!["disable", "bgp", "neighbor", "127.0.0.99"],
        vec!["disable", "bgp", "peer", "127.0.0.41"],
    ] {
        let (text, ok) = cli(&sock, &bad);
        assert!(!ok && !text.is_empty(), "{bad:?}: {text}");
    }
}

/// A neighbor with `tcp-ao` (RFC 5925). Where the kernel has TCP-AO, it runs with the key
/// on its sockets and `show configuration` names the key but never shows it. Where the
/// kernel has none, the daemon refuses to start with it, and a reload that adds it is
/// refused with the reason while the daemon runs on: never an unsigned session.
#[test]
fn tcp_ao_neighbor_runs_or_is_refused_with_the_reason() {
    let dir = tempdir("tcp-ao");
    let port_r = free_port("127.0.0.40");
    let sock = socket(&dir);
    let ao = "tcp-ao = { key-id = 9, algorithm = \"aes-128-cmac-96\", key = \"ao-s3cret\" }";
    let with_ao = ribshard_config(port_r, "127.0.0.41", 65041, 179, ao, true);
    let without = ribshard_config(port_r, "127.0.0.41", 65041, 179, "", true);
    let why =
        "neighbor 127.0.0.41 (AS65041): tcp-ao: TCP-AO (RFC 5925) is not available in this kernel";
    if ribshard_engine::socket::tcp_ao_supported() {
        let (_rs, _) = ribshard(&dir, &with_ao);
        let (text, ok) = cli(&sock, &["--json", "show", "configuration"]);
        assert!(ok, "{text}");
        let running: RunningConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(
            running.neighbor[0].tcp_ao.as_deref(),
            Some("key-id 9 receive-id 9 aes-128-cmac-96")
        );
        assert!(!text.contains("ao-s3cret"));
        return;
    }
    let (mut rs, _) = ribshard(&dir, &with_ao);
    let status = rs.0.wait().unwrap();
    assert!(!status.success());
    assert!(log_of(&dir).contains(why), "{}", log_of(&dir));
    // Running without it, a reload that adds it is refused and changes nothing.
    let (_rs, _) = ribshard(&dir, &without);
    std::fs::write(dir.join("ribshard.toml"), with_socket(&dir, &with_ao)).unwrap();
    let (text, ok) = cli(&sock, &["configure", "reload"]);
    assert!(!ok && text.contains(why), "{text}");
    let (text, ok) = cli(&sock, &["show", "bgp", "summary"]);
    assert!(ok, "{text}");
}
