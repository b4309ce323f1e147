//! `show validation session` and `show validation database` as text.

use std::fmt::Write;

/// `show validation session`.
pub fn sessions(v: &ribshard_mgmt::validation::ValidationSessions) -> String {
    let mut o = String::new();
    if !v.configured {
        o.push_str("RPKI: off (no [rpki] in the configuration): every route is unknown to validation-state\n");
        return o;
    }
    let _ = writeln!(
        o,
        "RPKI data: version {}, {} IPv4 and {} IPv6 VRPs, {} ASPA records{}",
        v.version,
        v.vrps_v4,
        v.vrps_v6,
        v.aspas,
        if v.expired {
            " (dropped: no cache answered within the expire interval)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "{:<28} {:>4} {:<10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5}",
        "Cache", "Pref", "State", "Version", "Serial", "IPv4", "IPv6", "ASPA", "Flaps"
    );
    for c in &v.caches {
        let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:<28} {:>4} {:<10} {:>7} {:>10} {:>8} {:>8} {:>6} {:>5}",
            c.address,
            c.preference,
            c.state,
            opt(c.version.map(|v| v.to_string())),
            opt(c.serial.map(|s| s.to_string())),
            c.records_v4,
            c.records_v6,
            c.aspas,
            c.flaps
        );
        if c.state == "up" {
            let _ = writeln!(
                o,
                "  session id {}, refresh {} s, retry {} s, expire {} s",
                opt(c.session_id.map(|s| s.to_string())),
                c.refresh,
                c.retry,
                c.expire
            );
        }
        if let Some(e) = &c.last_error {
            let _ = writeln!(o, "  last error: {} ({})", e.message, e.kind);
        }
    }
    o
}

/// `show validation database`.
pub fn database(d: &ribshard_mgmt::validation::ValidationDatabase) -> String {
    let mut o = String::new();
    if !d.vrps.is_empty() {
        let _ = writeln!(
            o,
            "{:<44} {:>10} {:>12}",
            "Prefix", "Max length", "Origin AS"
        );
        for r in &d.vrps {
            let _ = writeln!(o, "{:<44} {:>10} {:>12}", r.prefix, r.max_length, r.asn);
        }
    }
    if !d.aspas.is_empty() {
        let _ = writeln!(o, "{:<12} Providers", "Customer AS");
        for a in &d.aspas {
            let p: Vec<String> = a.providers.iter().map(u32::to_string).collect();
            let _ = writeln!(o, "{:<12} {}", a.customer, p.join(" "));
        }
    }
    let _ = writeln!(
        o,
        "{} records{} (data version {})",
        d.matching,
        if d.truncated { ", the first shown" } else { "" },
        d.version
    );
    o
}
