//! Streaming MRT reader: one record in memory at a time, transparent gzip and bzip2.

use crate::record::MrtError;
use crate::types;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

/// One MRT record as read: common header fields and the body (RFC 6396 section 2).
#[derive(Clone, Copy, Debug)]
pub struct RawRecord<'a> {
    pub timestamp: u32,
    /// The microsecond field of the _ET types (RFC 6396 section 3).
    pub microseconds: Option<u32>,
    pub mrt_type: u16,
    pub subtype: u16,
    pub body: &'a [u8],
}

/// Reads MRT records from any byte stream, reusing one buffer.
pub struct MrtReader<R> {
    inner: R,
    buf: Vec<u8>,
    records: u64,
}

/// Opens an MRT file, gzip- or bzip2-compressed or plain, detected from its first octets.
pub fn open(path: impl AsRef<Path>) -> Result<MrtReader<Box<dyn Read + Send>>, MrtError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| MrtError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let mut br = BufReader::with_capacity(1 << 16, file);
    let head = br.fill_buf().map_err(MrtError::Io)?;
    let reader: Box<dyn Read + Send> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(br),
        ))
    } else if head.starts_with(b"BZh") {
        Box::new(BufReader::with_capacity(
            1 << 16,
            bzip2::bufread::MultiBzDecoder::new(br),
        ))
    } else {
        Box::new(br)
    };
    Ok(MrtReader::new(reader))
}

impl<R: Read> MrtReader<R> {
    pub fn new(inner: R) -> Self {
        MrtReader {
            inner,
            buf: Vec::with_capacity(1 << 16),
            records: 0,
        }
    }

    /// Records returned so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// The next record, or `None` at a clean end of file. A file that ends inside a record
    /// is an error naming the record.
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'_>>, MrtError> {
        let mut header = [0u8; 12];
        match read_full(&mut self.inner, &mut header)? {
            0 => return Ok(None),
            12 => {}
            got => {
                return Err(MrtError::Truncated {
                    record: self.records,
                    expected: 12,
                    got,
                })
            }
        }
        let [t0, t1, t2, t3, y0, y1, s0, s1, l0, l1, l2, l3] = header;
        let timestamp = u32::from_be_bytes([t0, t1, t2, t3]);
        let mrt_type = u16::from_be_bytes([y0, y1]);
        let subtype = u16::from_be_bytes([s0, s1]);
        let length = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
        // No MRT record carries more than a few BGP messages or one prefix's paths; a huge
        // length means a corrupt file, not a reason to allocate gigabytes.
        if length > 64 << 20 {
            return Err(MrtError::RecordTooLarge {
                record: self.records,
                length,
            });
        }
        // Grow with the data actually read, so a corrupt length costs no more than the
        // octets that are really there.
        self.buf.clear();
        let got = (&mut self.inner)
            .take(length as u64)
            .read_to_end(&mut self.buf)
            .map_err(MrtError::Io)?;
        if got != length {
            return Err(MrtError::Truncated {
                record: self.records,
                expected: length,
                got,
            });
        }
        self.records += 1;
        let et = matches!(mrt_type, types::BGP4MP_ET | 33 | 49);
        let (microseconds, body) = if et {
            match self.buf.split_first_chunk::<4>() {
                Some((us, rest)) => (Some(u32::from_be_bytes(*us)), rest),
                None => {
                    return Err(MrtError::Malformed {
                        what: "extended timestamp missing",
                    })
                }
            }
        } else {
            (None, self.buf.as_slice())
        };
        Ok(Some(RawRecord {
            timestamp,
            microseconds,
            mrt_type,
            subtype,
            body,
        }))
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<usize, MrtError> {
    let mut got = 0;
    while got < buf.len() {
        let Some(dst) = buf.get_mut(got..) else { break };
        match r.read(dst) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(MrtError::Io(e)),
        }
    }
    Ok(got)
}
