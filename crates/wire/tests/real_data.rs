//! Byte-exact round trips of real BGP messages and attribute sets from route collectors.

use ribshard_mrt::{Bgp4mpBody, Record, RibRecord, TableDump};
use ribshard_wire::{
    decode, parse_attributes_only, Action, Message, PathAttributes, UpdateMessage,
};

/// Every BGP message of an update trace decodes, and every UPDATE re-encodes to the same
/// octets from the owned model.
fn round_trip_trace(name: &str) -> Option<(usize, usize)> {
    let path = ribshard_mrt::shared_data_file(name)?;
    let mut reader = ribshard_mrt::open(&path).expect("open trace");
    let (mut updates, mut prefixes) = (0, 0);
    while let Some(raw) = reader.next_record().expect("read record") {
        let Ok(Record::Bgp4mp(m)) = Record::parse(&raw) else {
            continue;
        };
        let Bgp4mpBody::Message(msg) = m.body else {
            continue;
        };
        let params = m.params();
        let decoded = decode(msg, &params).unwrap_or_else(|e| panic!("{e}: {msg:02x?}"));
        if let Message::Update(u) = decoded {
            assert_eq!(u.action(), Action::Accept, "real UPDATE flagged: {u:?}");
            prefixes += u.announced().count() + u.withdrawn_all().count();
            let owned = UpdateMessage::from_parsed(&u, &params);
            let again = owned.encode(&params);
            assert_eq!(again, msg, "UPDATE does not round-trip: {owned:?}");
            updates += 1;
        }
    }
    Some((updates, prefixes))
}

#[test]
fn ris_2016_updates_round_trip_byte_exact() {
    if let Some((updates, prefixes)) = round_trip_trace("ris-updates-20160811.mrt.gz") {
        assert!(updates > 10_000, "only {updates} UPDATEs");
        // 39,256 announcements and 1,956 withdrawals, per the data README.
        assert_eq!(prefixes, 39_256 + 1_956);
    }
}

#[test]
fn ris_2007_updates_round_trip_byte_exact() {
    if let Some((updates, _)) = round_trip_trace("ris-updates-20070211.mrt.gz") {
        assert!(updates > 10_000, "only {updates} UPDATEs");
    }
}

#[test]
fn routeviews_2010_rib_attributes_round_trip_byte_exact() {
    let Some(path) = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") else {
        return;
    };
    let mut reader = ribshard_mrt::open(&path).expect("open");
    let params = RibRecord::params();
    let mut routes = 0usize;
    let mut prefixes = 0usize;
    while let Some(raw) = reader.next_record().expect("read") {
        if let Record::Rib(rib) = Record::parse(&raw).expect("parse") {
            prefixes += 1;
            for e in &rib.entries {
                let u = parse_attributes_only(e.attributes, &params).expect("attributes");
                assert!(u.treat_as_withdraw.is_none() && u.discarded.is_empty());
                let owned = PathAttributes::from_view(&u.attrs, &params);
                assert_eq!(owned.to_bytes(&params), e.attributes);
                routes += 1;
            }
        }
    }
    // The data README: 323,487 prefixes and 641,957 routes.
    assert_eq!((prefixes, routes), (323_487, 641_957));
}

#[test]
fn ris_2002_table_dump_attributes_round_trip_byte_exact() {
    let Some(path) = ribshard_mrt::shared_data_file("ris-rrc00-bview-20020722.mrt.gz") else {
        return;
    };
    let mut reader = ribshard_mrt::open(&path).expect("open");
    let params = TableDump::params();
    let mut routes = 0;
    while let Some(raw) = reader.next_record().expect("read") {
        if let Record::TableDump(t) = Record::parse(&raw).expect("parse") {
            let u = parse_attributes_only(t.attributes, &params).expect("attributes");
            let owned = PathAttributes::from_view(&u.attrs, &params);
            assert_eq!(owned.to_bytes(&params), t.attributes);
            routes += 1;
        }
    }
    assert_eq!(routes, 115_521);
}
