use super::*;
use ribshard_rib::AddPathSelect;
use std::path::Path;

fn load_str(text: &str) -> Result<Config, Errors> {
    parse(text, Path::new("test.toml"))
}

/// The errors as (line, key, kind) triples.
fn errors(text: &str) -> Vec<(Option<usize>, String, ErrorKind)> {
    match load_str(text) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(Errors(v)) => v.into_iter().map(|e| (e.line, e.key, e.kind)).collect(),
    }
}

const HEAD: &str = "[bgp]\nlocal-as = 65000\nrouter-id = \"192.0.2.1\"\n";

/// One external group with one neighbor: the least a configuration needs besides `[bgp]`.
const ONE_NEIGHBOR: &str = "[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n\
                            [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n";

#[test]
fn the_example_loads() {
    let c = load_str(EXAMPLE).unwrap();
    assert_eq!(c.local_as, 65000);
    assert_eq!(c.peers.len(), 4);
    assert_eq!(
        c.threading,
        Threading {
            shards: 2,
            update_threads: 2,
            write_queue_high_water: 16 << 20,
        }
    );
    assert_eq!(
        c.path_selection.multipath,
        Some(ribshard_rib::Multipath { multiple_as: true })
    );
    assert!(c.path_selection.external_router_id && !c.path_selection.always_compare_med);
    let p = &c.peers[0];
    assert_eq!(
        (p.port, p.authentication_key.as_deref()),
        (1790, Some("s3cret"))
    );
    assert_eq!(
        p.prefix_limits[0],
        Some(PrefixLimit {
            maximum: 1_000_000,
            teardown: true,
            idle_timeout: Some(300)
        })
    );
    // Overrides: neighbor over group.
    assert_eq!(c.peers[1].peer_as, 65002);
    assert!(c.peers[1].passive);
    assert_eq!(c.peers[2].hold_time, 30);
    assert_eq!(c.peers[2].group_type, GroupType::Internal);
    assert_eq!(c.peers[2].peer_as, 65000);
}

#[test]
fn the_issue_sample_loads() {
    let text = format!(
        "{HEAD}listen = [\"127.0.0.1:1179\"]\n[bgp.rib-sharding]\nnumber-of-shards = 2\n\
         [bgp.update-threading]\nnumber-of-threads = 2\n[[bgp.group]]\nname = \"upstreams\"\n\
         type = \"external\"\npeer-as = 65001\nimport = [\"accept\"]\nexport = [\"reject\"]\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\nport = 1790\nlocal-address = \"198.51.100.1\"\n"
    );
    let c = load_str(&text).unwrap();
    assert_eq!(c.listen, ["127.0.0.1:1179".parse().unwrap()]);
    assert_eq!(c.peers[0].export, ["reject"]);
}

#[test]
fn defaults() {
    let c = load_str(&format!(
        "{HEAD}[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         [[bgp.group]]\nname = \"i\"\ntype = \"internal\"\n[[bgp.group.neighbor]]\naddress = \"198.51.100.3\"\n"
    ))
    .unwrap();
    let (e, i) = (&c.peers[0], &c.peers[1]);
    assert_eq!(
        (e.hold_time, e.port, e.connect_retry_time, e.send_hold_time),
        (90, 179, 30, 480)
    );
    // RFC 8212 for external sessions; internal ones accept.
    assert_eq!(
        (e.import.as_slice(), e.export.as_slice()),
        (&["reject".to_string()][..], &["reject".to_string()][..])
    );
    assert_eq!(i.import, ["accept"]);
    assert_eq!(e.families, [Family::Ipv4Unicast, Family::Ipv6Unicast]);
    assert_eq!(c.listen.len(), 2);
    assert_eq!(c.path_selection, ribshard_rib::Options::default());
    assert_eq!(
        c.path_selection.multipath, None,
        "no load sharing unless asked"
    );
    let (shards, update_threads) = crate::advise::default_threads(crate::advise::machine::cores());
    assert_eq!(
        c.threading,
        Threading {
            shards,
            update_threads,
            write_queue_high_water: 16 << 20,
        }
    );
    assert_eq!(
        c.update_delay,
        Some(ribshard_engine::pipeline::UpdateDelay {
            max_delay: std::time::Duration::from_secs(120),
            establish_wait: std::time::Duration::from_secs(5),
        }),
        "advertising waits for the first tables"
    );
}

/// Unset, the threads follow the cores: the single-threaded mode below four (what measured
/// best on two), then one core for the sessions, two update threads and the rest shards. One
/// set alone keeps the other workable.
#[test]
fn default_threads_follow_the_cores() {
    use crate::advise::default_threads;
    assert_eq!(default_threads(1), (1, 0));
    assert_eq!(default_threads(2), (1, 0));
    assert_eq!(default_threads(3), (1, 0));
    assert_eq!(default_threads(4), (2, 1));
    assert_eq!(default_threads(8), (5, 2));
    assert_eq!(default_threads(64), (61, 2));
    let c = load_str(&format!(
        "{HEAD}[bgp.rib-sharding]\nnumber-of-shards = 4\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    assert_eq!(c.threading.shards, 4);
    assert!(
        c.threading.update_threads >= 1,
        "shards need update threads"
    );
    let c = load_str(&format!(
        "{HEAD}[bgp.update-threading]\nnumber-of-threads = 0\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    assert_eq!((c.threading.shards, c.threading.update_threads), (1, 0));
}

#[test]
fn update_delay_settings_and_errors() {
    let c = load_str(&format!(
        "{HEAD}[bgp.update-delay]\nmax-delay = 0\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    assert_eq!(c.update_delay, None, "0 turns it off");
    let c = load_str(&format!(
        "{HEAD}[bgp.update-delay]\nmax-delay = 30\nestablish-wait = 2\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    let d = c.update_delay.unwrap();
    assert_eq!((d.max_delay.as_secs(), d.establish_wait.as_secs()), (30, 2));
    let e = errors(&format!(
        "{HEAD}[bgp.update-delay]\nmax-delay = 10\nestablish-wait = 20\n{ONE_NEIGHBOR}"
    ));
    assert_eq!(
        (e[0].0, e[0].1.as_str()),
        (Some(6), "bgp.update-delay.establish-wait")
    );
    let e = errors(&format!(
        "{HEAD}[bgp.update-delay]\nmax-dely = 10\n{ONE_NEIGHBOR}"
    ));
    assert!(
        matches!(&e[0].2, ErrorKind::UnknownKey(m) if m.contains("did you mean `max-delay`")),
        "{e:?}"
    );
}

#[test]
fn graceful_restart_settings_and_errors() {
    let c = load_str(&format!("{HEAD}{ONE_NEIGHBOR}")).unwrap();
    assert_eq!(c.graceful_restart, None, "absent: helper only");
    let c = load_str(&format!("{HEAD}[bgp.graceful-restart]\n{ONE_NEIGHBOR}")).unwrap();
    let g = c.graceful_restart.clone().unwrap();
    assert_eq!(
        (g.restart_time, g.sigterm_restarts, g.state_file.to_str()),
        (120, true, Some(super::graceful::DEFAULT_STATE_FILE))
    );
    // Every neighbor's OPEN offers it.
    let s = super::settings(&c, &c.peers[0]);
    assert_eq!(
        s.graceful_restart.map(|g| g.restart_time),
        Some(120),
        "{s:?}"
    );
    let c = load_str(&format!(
        "{HEAD}[bgp.graceful-restart]\nrestart-time = 300\non-sigterm = \"shutdown\"\n\
         state-file = \"/tmp/x\"\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    let g = c.graceful_restart.unwrap();
    assert_eq!((g.restart_time, g.sigterm_restarts), (300, false));
    let e = errors(&format!(
        "{HEAD}[bgp.graceful-restart]\nrestart-time = 0\non-sigterm = \"reboot\"\n{ONE_NEIGHBOR}"
    ));
    let keys: Vec<(Option<usize>, &str)> = e.iter().map(|e| (e.0, e.1.as_str())).collect();
    assert_eq!(
        keys,
        [
            (Some(5), "bgp.graceful-restart.restart-time"),
            (Some(6), "bgp.graceful-restart.on-sigterm")
        ],
        "{e:?}"
    );
    let c = load_str(&format!(
        "{HEAD}[bgp.graceful-restart]\nlong-lived-stale-time = 86400\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    let s = super::settings(&c, &c.peers[0]);
    assert_eq!(
        s.graceful_restart.map(|g| g.long_lived_stale_time),
        Some(86400)
    );
    // The cap on what neighbors ask is a neighbor setting, graceful restart or not.
    let c = load_str(&format!(
        "{HEAD}max-long-lived-stale-time = 3600\n{ONE_NEIGHBOR}"
    ))
    .unwrap();
    assert_eq!(
        super::settings(&c, &c.peers[0]).max_long_lived_stale_time,
        Some(3600)
    );
    let e = errors(&format!(
        "{HEAD}[bgp.graceful-restart]\nlong-lived-stale-time = 16777216\n{ONE_NEIGHBOR}"
    ));
    assert_eq!(
        e[0].1, "bgp.graceful-restart.long-lived-stale-time",
        "{e:?}"
    );
    let e = errors(&format!(
        "{HEAD}[bgp.graceful-restart]\nrestart-time = 4096\n{ONE_NEIGHBOR}"
    ));
    assert!(e[0].2.to_string().contains("1 to 4095 seconds"), "{e:?}");
}

#[test]
fn inheritance_most_specific_wins() {
    let c = load_str(&format!(
        "{HEAD}hold-time = 60\n[[bgp.group]]\nname = \"g\"\ntype = \"external\"\npeer-as = 1\nhold-time = 30\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.3\"\nhold-time = 9\n\
         [[bgp.group]]\nname = \"h\"\ntype = \"external\"\npeer-as = 2\n[[bgp.group.neighbor]]\naddress = \"198.51.100.4\"\n"
    ))
    .unwrap();
    let holds: Vec<u16> = c.peers.iter().map(|p| p.hold_time).collect();
    assert_eq!(holds, [30, 9, 60]);
    assert_eq!(c.peers[1].send_hold_time, 480);
}

#[test]
fn each_error_has_its_line_and_key() {
    let text = "[bgp]\nlocal-as = 65000\nrouter-id = \"0.0.0.0\"\nhold-time = 2\n\n\
        [[bgp.group]]\nname = \"a\"\ntype = \"externa\"\nimport = [\"acept\"]\n\n\
        [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\nttl-security = 0\n\n\
        [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\npeer-as = 65001\n\n\
        [[bgp.group]]\nname = \"a\"\ntype = \"internal\"\ncluster = \"1.2.3.4\"\n\
        [[bgp.group.neighbor]]\naddress = \"2001:db8::1\"\nlocal-address = \"198.51.100.1\"\npeer-as = 7\n";
    let e = errors(text);
    let find = |key: &str| {
        e.iter()
            .find(|(_, k, _)| k == key)
            .unwrap_or_else(|| panic!("no error for {key}: {e:?}"))
            .clone()
    };
    assert_eq!(find("bgp.router-id").0, Some(3));
    assert_eq!(find("bgp.hold-time").0, Some(4));
    assert_eq!(find("bgp.group[0].type").0, Some(8));
    assert_eq!(find("bgp.group[0].import[0]").0, Some(9));
    assert_eq!(find("bgp.group[0].neighbor[0].ttl-security").0, Some(13));
    let (line, _, kind) = find("bgp.group[0].neighbor[0].peer-as");
    assert_eq!((line, kind), (Some(11), ErrorKind::Missing));
    let (line, _, kind) = find("bgp.group[0].neighbor[1].address");
    assert_eq!(line, Some(16));
    assert_eq!(
        kind,
        ErrorKind::Duplicate {
            value: "neighbor 198.51.100.2 port 179".into(),
            first: 12
        }
    );
    assert_eq!(
        find("bgp.group[1].name").2,
        ErrorKind::Duplicate {
            value: "group \"a\"".into(),
            first: 7
        }
    );
    assert_eq!(find("bgp.group[1].neighbor[0].local-address").0, Some(25));
    assert_eq!(find("bgp.group[1].neighbor[0].peer-as").0, Some(26));
    assert_eq!(e.len(), 10, "{e:#?}");
}

#[test]
fn unknown_keys_are_errors() {
    let e = errors(&format!(
        "{HEAD}[[bgp.group]]\nname = \"x\"\ntype = \"internal\"\n[[bgp.group.neighbor]]\naddress = \"198.51.100.1\"\nporrt = 5\n"
    ));
    assert_eq!(e.len(), 1);
    let (line, key, kind) = &e[0];
    assert_eq!(
        (line, key.as_str()),
        (&Some(9), "bgp.group[0].neighbor[0].porrt")
    );
    assert_eq!(
        kind,
        &ErrorKind::UnknownKey("is not a key here: did you mean `port`?".into())
    );
    // Misspelt, a required key is not reported missing as well.
    let e = errors("[bgp]\nlocal-as = 1\nrouterid = \"1.1.1.1\"\n");
    assert_eq!((e[0].0, e[0].1.as_str()), (Some(3), "bgp.routerid"));
    assert_eq!(e.len(), 1, "{e:?}");
}

#[test]
fn wrong_types_and_syntax() {
    let e = errors("[bgp]\nlocal-as = \"x\"\n");
    assert_eq!((e[1].0, e[1].1.as_str()), (Some(2), "bgp.local-as"));
    assert_eq!(
        e[1].2,
        ErrorKind::Parse("\"x\" is a string: expected a whole number from 0 to 4294967295".into())
    );
    // The same mistake is not reported again as a missing key; the other missing one is.
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(
        (&e[0].1[..], &e[0].2),
        ("bgp.router-id", &ErrorKind::Missing)
    );
    let e = errors("[bgp]\nlocal-as = 1\nlisten = [\"127.0.0.1\"]\n");
    assert_eq!((e[1].0, e[1].1.as_str()), (Some(3), "bgp.listen[0]"));
    let e = errors("[bgp\nlocal-as = 1\n");
    assert_eq!(e[0].0, Some(1));
}

#[test]
fn missing_and_semantic_errors() {
    let e = errors("[bgp]\n");
    let keys: Vec<&str> = e.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(keys, ["bgp.local-as", "bgp.router-id"]);
    // No neighbors: it loads, with a warning (filled by reloads later).
    let c = check(HEAD, Path::new("test.toml"));
    assert!(c.config.is_ok_and(|c| c.peers.is_empty()));
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].kind, WarningKind::NoNeighbors);
    let e = errors(&format!("{HEAD}add-path = [\"recieve\"]\n"));
    assert_eq!((e[0].0, e[0].1.as_str()), (Some(4), "bgp.add-path[0]"));
    let e = errors(&format!(
        "{HEAD}[bgp.update-threading]\nwrite-queue-high-water = 65535\n"
    ));
    assert_eq!(
        (e[0].0, e[0].1.as_str()),
        (Some(5), "bgp.update-threading.write-queue-high-water")
    );
    let e = errors(&format!("{HEAD}local-as = 23456\n"));
    assert!(
        matches!(&e[0].2, ErrorKind::Parse(m) if m.contains("duplicate key")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{HEAD}[[bgp.group]]\nname = \"g\"\ntype = \"external\"\npeer-as = 65000\nauthentication-key = \"{}\"\n\
         [bgp.group.prefix-limit.inet-unicast]\nteardown = true\n[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n",
        "k".repeat(81)
    ));
    let keys: Vec<&str> = e.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "bgp.group[0].authentication-key",
            "bgp.group[0].prefix-limit.inet-unicast.maximum",
            "bgp.group[0].neighbor[0].peer-as"
        ]
    );
}

#[test]
fn local_as_options() {
    let group = "[[bgp.group]]\nname = \"old-as\"\ntype = \"external\"\npeer-as = 65001\n";
    let c = load_str(&format!(
        "{HEAD}{group}local-as = 65100\nlocal-as-private = true\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\nno-prepend-global-as = true\n"
    ))
    .unwrap();
    let p = &c.peers[0];
    assert_eq!((c.local_as, p.local_as), (65000, 65100));
    assert!(p.local_as_private && p.no_prepend_global_as);
    // Without a local-as of its own, the options have nothing to act on.
    let e = errors(&format!(
        "{HEAD}{group}no-prepend-global-as = true\n[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n"
    ));
    assert_eq!(
        e,
        [(
            Some(8),
            "bgp.group[0].no-prepend-global-as".into(),
            ErrorKind::Invalid {
                value: "true".into(),
                why: "applies only with a local-as other than bgp.local-as, on external groups",
            }
        )]
    );
}

#[test]
fn management_defaults_and_errors() {
    let neighbor = "[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n\
                    [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n";
    let c = load_str(&format!("{HEAD}{neighbor}")).unwrap();
    assert_eq!(
        c.management,
        Management {
            socket: DEFAULT_SOCKET.into(),
            listen: vec![],
            read_only: true,
            metrics: None,
        }
    );
    let c = load_str(&format!(
        "{HEAD}{neighbor}[management]\nsocket = \"/tmp/x.sock\"\nlisten = [\"127.0.0.1:50179\"]\n\
         read-only = false\nmetrics = \"127.0.0.1:9179\"\n"
    ))
    .unwrap();
    assert_eq!(c.management.socket, std::path::PathBuf::from("/tmp/x.sock"));
    assert!(!c.management.read_only);
    assert_eq!(
        c.management.metrics,
        Some("127.0.0.1:9179".parse().unwrap())
    );
    let e = errors(&format!("{HEAD}{neighbor}[management]\nsocket = \"\"\n"));
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].0, e[0].1.as_str()), (Some(11), "management.socket"));
    let e = errors(&format!("{HEAD}{neighbor}[management]\nsockets = \"/x\"\n"));
    assert_eq!((e[0].0, e[0].1.as_str()), (Some(11), "management.sockets"));
}

/// A value of the wrong type in a policy says what was expected, in words, and nothing
/// that follows from setting it aside (the term "has no action", the next "never reached").
#[test]
fn a_policy_value_of_the_wrong_type_is_one_worded_error() {
    let text = format!(
        "{HEAD}{ONE_NEIGHBOR}import = [\"in\"]\n\
         [[policy-options.policy-statement.in.term]]\nname = \"a\"\n\
         then = {{ local-preference = \"80\", action = \"accept\" }}\n\
         [[policy-options.policy-statement.in.term]]\nname = \"b\"\nthen = {{ action = \"reject\" }}\n"
    );
    let c = check(&text, Path::new("test.toml"));
    let Err(Errors(e)) = c.config else {
        panic!("accepted")
    };
    assert_eq!(e.len(), 1, "{e:?}");
    let said = e[0].to_string();
    assert!(
        said.contains("then.local-preference") && said.contains("expected a number"),
        "{said}"
    );
    assert!(!said.contains("untagged"), "{said}");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn memory_limit_takes_a_size_with_its_unit() {
    use super::resolve::parse_size;
    assert_eq!(parse_size("4GiB"), Ok(4 << 30));
    assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
    assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
    assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
    assert!(parse_size("4").is_err());
    assert!(parse_size("4 gigs").is_err());
    assert!(parse_size("GiB").is_err());
    let c = load_str(&format!("{HEAD}memory-limit = \"1GiB\"\n{ONE_NEIGHBOR}")).unwrap();
    assert_eq!(c.memory_limit, Some(1 << 30));
    let c = load_str(&format!("{HEAD}{ONE_NEIGHBOR}")).unwrap();
    assert_eq!(c.memory_limit, None);
    for bad in ["4", "16MiB"] {
        let e = errors(&format!("{HEAD}memory-limit = \"{bad}\"\n{ONE_NEIGHBOR}"));
        assert!(
            e.iter()
                .any(|(line, key, _)| key == "bgp.memory-limit" && *line == Some(4)),
            "{bad}: {e:?}"
        );
    }
}

#[test]
fn tcp_ao() {
    use ribshard_engine::socket::{AoAlgorithm, TcpAoKey};
    let group = "[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n";
    let c = load_str(&format!(
        "{HEAD}{group}tcp-ao = {{ key-id = 3, key = \"group-secret\" }}\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.3\"\n\
         tcp-ao = {{ key-id = 5, receive-id = 6, algorithm = \"aes-128-cmac-96\", key = \"own\" }}\n"
    ))
    .unwrap();
    assert_eq!(
        c.peers[0].tcp_ao,
        Some(TcpAoKey {
            send_id: 3,
            receive_id: 3,
            algorithm: AoAlgorithm::HmacSha1_96,
            secret: b"group-secret".to_vec(),
        })
    );
    assert_eq!(
        c.peers[1].tcp_ao,
        Some(TcpAoKey {
            send_id: 5,
            receive_id: 6,
            algorithm: AoAlgorithm::AesCmac128_96,
            secret: b"own".to_vec(),
        })
    );
    // Each mistake at its key and line.
    let e = errors(&format!(
        "{HEAD}{group}[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         tcp-ao = {{ algorithm = \"md5\", key = \"{}\" }}\n\
         [[bgp.group.neighbor]]\naddress = \"198.51.100.3\"\nauthentication-key = \"m\"\n\
         tcp-ao = {{ key-id = 1, key = \"a\" }}\n",
        "k".repeat(81)
    ));
    let found: Vec<(Option<usize>, &str)> = e.iter().map(|(l, k, _)| (*l, k.as_str())).collect();
    assert_eq!(
        found,
        [
            (Some(10), "bgp.group[0].neighbor[0].tcp-ao.key-id"),
            (Some(10), "bgp.group[0].neighbor[0].tcp-ao.key"),
            (Some(10), "bgp.group[0].neighbor[0].tcp-ao.algorithm"),
            (Some(14), "bgp.group[0].neighbor[1].tcp-ao"),
        ],
        "{e:?}"
    );
    assert!(matches!(&e[1].2, ErrorKind::Invalid { why, .. } if why.contains("1 to 80 octets")));
    assert!(matches!(&e[2].2, ErrorKind::Invalid { why, .. } if why.contains("aes-128-cmac-96")));
    assert!(matches!(&e[3].2, ErrorKind::Invalid { why, .. } if why.contains("not both")));
}

#[test]
fn rpki_caches_and_the_policies_that_read_it() {
    let rov =
        "[[policy-options.policy-statement.rov.term]]\nfrom = { validation-state = \"invalid\" }\n\
               then = { action = \"reject\" }\n";
    let group = "[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n";
    let c = load_str(&format!(
        "{HEAD}{group}import = [\"rov\"]\n[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         [rpki]\n[[rpki.cache]]\naddress = \"192.0.2.10\"\n[[rpki.cache]]\naddress = \"192.0.2.11\"\n\
         port = 3323\npreference = 0\n{rov}"
    ))
    .unwrap();
    let r = c.rpki.unwrap();
    assert_eq!(r.max_version, 2);
    assert_eq!(
        r.caches
            .iter()
            .map(|c| (c.address.to_string(), c.preference))
            .collect::<Vec<_>>(),
        [
            ("192.0.2.10:323".to_string(), 0),
            ("192.0.2.11:3323".to_string(), 0)
        ]
    );
    // A cache without its address, a version we do not speak, and an export policy reading
    // a state only import looks up: each at its key.
    let e = errors(&format!(
        "{HEAD}{group}export = [\"rov\"]\n[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
         [rpki]\nmax-version = 3\n[[rpki.cache]]\nport = 323\n{rov}"
    ));
    let keys: Vec<&str> = e.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "bgp.group[0].export[0]",
            "rpki.max-version",
            "rpki.cache[0].address"
        ],
        "{e:?}"
    );
    // A policy reading validation-state without [rpki]: it loads, with a warning.
    let checked = check(
        &format!("{HEAD}{group}import = [\"rov\"]\n[[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n{rov}"),
        Path::new("test.toml"),
    );
    assert!(checked.config.is_ok());
    assert!(
        checked
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::RpkiUnfed
                && w.key == "bgp.group[0].neighbor[0].import[0]"),
        "{:?}",
        checked.warnings
    );
}

#[test]
fn add_path_send_selections() {
    let group = |extra: &str| {
        format!(
            "{HEAD}[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n{extra}\n\
             [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n\
             [[bgp.group.neighbor]]\naddress = \"198.51.100.3\"\nadd-path-send = {{ mode = \"equal-cost\" }}\n"
        )
    };
    let c = load_str(&group("add-path-send = { path-count = 4 }")).unwrap();
    // Implies the capability; a neighbor's own setting wins over its group's.
    assert!(c.peers[0].add_path_send);
    assert_eq!(c.peers[0].add_path_select, Some(AddPathSelect::Best(4)));
    assert_eq!(
        c.peers[1].add_path_select,
        Some(AddPathSelect::EqualCost(64))
    );
    // The shards keep the union of every selection.
    assert_eq!(
        c.path_selection.add_path,
        Some(ribshard_rib::AddPathKeep {
            ranked: 4,
            all: false,
            equal_cost: true
        })
    );
    let c = load_str(&group("add-path-send = { mode = \"all\" }")).unwrap();
    assert_eq!(c.peers[0].add_path_select, Some(AddPathSelect::All));
    // Without it, nothing is kept.
    let plain = load_str(&format!("{HEAD}{ONE_NEIGHBOR}")).unwrap();
    assert_eq!(plain.path_selection.add_path, None);
    for (bad, key) in [
        (
            "add-path-send = { path-count = 1 }",
            "add-path-send.path-count",
        ),
        (
            "add-path-send = { path-count = 65 }",
            "add-path-send.path-count",
        ),
        (
            "add-path-send = { mode = \"best\" }",
            "add-path-send.path-count",
        ),
        (
            "add-path-send = { mode = \"all\", path-count = 2 }",
            "add-path-send.path-count",
        ),
        (
            "add-path-send = { mode = \"some\", path-count = 2 }",
            "add-path-send.mode",
        ),
        ("add-path-send = { count = 2 }", "add-path-send.count"),
    ] {
        let e = errors(&group(bad));
        assert_eq!(
            (e[0].0, e[0].1.as_str()),
            (Some(8), format!("bgp.group[0].{key}").as_str()),
            "{bad}: {e:?}"
        );
    }
}

#[test]
fn bmp_stations_and_their_errors() {
    let group = "[[bgp.group]]\nname = \"e\"\ntype = \"external\"\npeer-as = 1\n\
                 [[bgp.group.neighbor]]\naddress = \"198.51.100.2\"\n";
    let c = load_str(&format!(
        "{HEAD}{group}[bmp]\nsys-name = \"rs1\"\n[[bmp.station]]\naddress = \"192.0.2.20\"\n\
         port = 11019\n[[bmp.station]]\nname = \"lg\"\naddress = \"2001:db8::20\"\nport = 5000\n\
         route-monitoring = [\"loc-rib\", \"pre-policy\", \"post-policy\"]\nstatistics-timeout = 0\n\
         buffer-size = 8\nretry = 2\nretry-max = 30\n"
    ))
    .unwrap();
    assert_eq!(c.bmp_sys_name.as_deref(), Some("rs1"));
    let [a, b] = &c.bmp[..] else {
        panic!("{:?}", c.bmp)
    };
    assert_eq!(a.name, "192.0.2.20:11019");
    assert!(a.ribs.pre_policy && !a.ribs.loc_rib && !a.ribs.post_policy);
    assert_eq!(
        a.statistics_interval,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(a.buffer, 64 << 20);
    assert_eq!(b.name, "lg");
    assert!(b.ribs.pre_policy && b.ribs.loc_rib && b.ribs.post_policy);
    assert_eq!(b.statistics_interval, None);
    assert_eq!(
        (b.buffer, b.retry.as_secs(), b.retry_max.as_secs()),
        (8 << 20, 2, 30)
    );
    // No port (BMP has no well-known one), a RIB not built, a retry of 0: each at its key.
    let e = errors(&format!(
        "{HEAD}{group}[[bmp.station]]\naddress = \"192.0.2.20\"\n[[bmp.station]]\n\
         address = \"192.0.2.21\"\nport = 1\nroute-monitoring = [\"adj-rib-out-pre-policy\"]\nretry = 0\n"
    ));
    let keys: Vec<&str> = e.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "bmp.station[0].port",
            "bmp.station[1].route-monitoring",
            "bmp.station[1].retry"
        ],
        "{e:?}"
    );
    assert!(e[1].2.to_string().contains("not built yet"), "{e:?}");
    // A station for the mirrored UPDATEs alone; without mirroring, no RIB is an error.
    let c = load_str(&format!(
        "{HEAD}{group}[[bmp.station]]\naddress = \"192.0.2.20\"\nport = 1\n\
         route-monitoring = []\nroute-mirroring = true\n"
    ))
    .unwrap();
    assert!(c.bmp[0].ribs.mirroring && !c.bmp[0].ribs.pre_policy);
    let e = errors(&format!(
        "{HEAD}{group}[[bmp.station]]\naddress = \"192.0.2.20\"\nport = 1\n\
         route-monitoring = []\n"
    ));
    assert_eq!(e[0].1, "bmp.station[0].route-monitoring", "{e:?}");
}
