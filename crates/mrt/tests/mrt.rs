//! MRT reading and writing against the real files of `../shared/data` and synthesized ones.

use ribshard_mrt::{open, MrtError, MrtReader, MrtWriter, Record, RibRecord};
use ribshard_wire::{parse_attributes_only, Action};
use std::io::{Read, Write};
use std::path::Path;

fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Reading the 2010 RouteViews RIB and writing it back gives the same octets.
#[test]
fn table_dump_v2_rewrite_is_byte_identical() {
    let Some(path) = ribshard_mrt::shared_data_file("routeviews-wide-20100701.mrt.gz") else {
        return;
    };
    let original = gunzip(&path);
    let mut reader = open(&path).unwrap();
    let mut w = MrtWriter::new(Vec::with_capacity(original.len()));
    let mut peers = 0;
    while let Some(raw) = reader.next_record().unwrap() {
        match Record::parse(&raw).unwrap() {
            Record::PeerIndexTable(t) => {
                peers = t.peers.len();
                w.write_peer_index_table(raw.timestamp, &t).unwrap()
            }
            Record::Rib(r) => w
                .write_rib(raw.timestamp, r.sequence, &r.prefix, &r.entries)
                .unwrap(),
            other => panic!("unexpected record {other:?}"),
        }
    }
    // The data README says 15 peers; the PEER_INDEX_TABLE holds 5 (bgpdump agrees).
    assert_eq!(peers, 5);
    let written = w.into_inner();
    assert_eq!(written.len(), original.len());
    assert!(written == original, "rewritten file differs");
}

/// Plain, gzip and bzip2 files read the same records.
#[test]
fn compression_is_detected() {
    let mut plain = MrtWriter::new(Vec::new());
    ribshard_mrt::synth::write_table(&mut plain, 500, 2, 7, 1_700_000_000).unwrap();
    let plain = plain.into_inner();
    let dir = std::env::temp_dir().join(format!("ribshard-mrt-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(&plain).unwrap();
    let files = [
        ("t.mrt", plain.clone()),
        ("t.mrt.gz", gz.finish().unwrap()),
        ("t.mrt.bz2", bz.finish().unwrap()),
    ];
    let mut counts = Vec::new();
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let mut r = open(&p).unwrap();
        let mut n = 0;
        while r.next_record().unwrap().is_some() {
            n += 1;
        }
        counts.push(n);
    }
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(counts, [501, 501, 501]);
}

/// A synthesized table has the asked-for shape and only well-formed attributes.
#[test]
fn synthesized_table_is_well_formed() {
    let mut w = MrtWriter::new(Vec::new());
    let paths = ribshard_mrt::synth::write_table(&mut w, 2_000, 3, 42, 1_700_000_000).unwrap();
    assert_eq!(paths, 6_000);
    let bytes = w.into_inner();
    let mut r = MrtReader::new(bytes.as_slice());
    let mut prefixes = std::collections::HashSet::new();
    while let Some(raw) = r.next_record().unwrap() {
        if let Record::Rib(rib) = Record::parse(&raw).unwrap() {
            assert_eq!(rib.entries.len(), 3);
            assert_eq!(rib.prefix, rib.prefix.masked());
            assert!(prefixes.insert(rib.prefix), "duplicate prefix");
            for e in &rib.entries {
                let u = parse_attributes_only(e.attributes, &RibRecord::params()).unwrap();
                assert_eq!(u.action(), Action::Accept);
                let path = u.attrs.as_path.unwrap();
                assert!(path.path_len() >= 2);
            }
        }
    }
    assert_eq!(prefixes.len(), 2_000);
}

/// A file cut inside a record is an error that says so, not a silent end.
#[test]
fn truncated_file_is_reported() {
    let mut w = MrtWriter::new(Vec::new());
    ribshard_mrt::synth::write_table(&mut w, 10, 1, 1, 0).unwrap();
    let mut bytes = w.into_inner();
    bytes.truncate(bytes.len() - 5);
    let mut r = MrtReader::new(bytes.as_slice());
    let err = loop {
        match r.next_record() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("truncation not detected"),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, MrtError::Truncated { record: 10, .. }),
        "{err}"
    );
}
