//! The BGP4MP log of what the sessions receive (`[mrt] updates`, `run --dump-updates`):
//! every UPDATE as it was received and every change of a session to or from Established, as
//! route collectors record them (RFC 6396 section 4.4), in files rotated by size or by time.
//! A file name's strftime fields (`%Y %m %d %H %M %S`, UTC) are those of its first record:
//! with a time rotation, of the interval's start, so `updates.%Y%m%d.%H%M` every 900 s
//! names files as RouteViews does.

use ribshard_mrt::{Bgp4mpSession, MrtWriter};
use std::io::BufWriter;
use std::path::PathBuf;

pub struct UpdatesLog {
    pattern: String,
    /// Start the first file empty (`--dump-updates`); else append to what is there (a
    /// restart within a rotation interval loses nothing).
    fresh: bool,
    rotate_size: Option<u64>,
    rotate_interval: Option<u32>,
    current: Option<Current>,
}

struct Current {
    path: PathBuf,
    writer: MrtWriter<BufWriter<std::fs::File>>,
    octets: u64,
    /// The time interval the file is for (with a time rotation).
    slot: u64,
}

/// A file name from a pattern and a time (UNIX seconds): `%Y %m %d %H %M %S %%`.
pub fn file_name(pattern: &str, unix: u64) -> String {
    let (y, mo, d, h, mi, s) = crate::cli::render::civil(unix as i64);
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('m') => out.push_str(&format!("{mo:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('M') => out.push_str(&format!("{mi:02}")),
            Some('S') => out.push_str(&format!("{s:02}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

impl UpdatesLog {
    pub fn new(
        pattern: String,
        rotate_size: Option<u64>,
        rotate_interval: Option<u32>,
    ) -> UpdatesLog {
        UpdatesLog {
            pattern,
            fresh: false,
            rotate_size,
            rotate_interval,
            current: None,
        }
    }

    /// One file, emptied first (`ribshard run --dump-updates FILE`).
    pub fn file(path: &std::path::Path) -> UpdatesLog {
        UpdatesLog {
            pattern: path.display().to_string().replace('%', "%%"),
            fresh: true,
            rotate_size: None,
            rotate_interval: None,
            current: None,
        }
    }

    /// The file being written.
    pub fn path(&self) -> Option<&PathBuf> {
        self.current.as_ref().map(|c| &c.path)
    }

    /// The writer for a record of `len` octets at `now`, opening a new file when the size
    /// or the interval says so.
    fn writer(
        &mut self,
        now: u32,
        len: u64,
    ) -> std::io::Result<&mut MrtWriter<BufWriter<std::fs::File>>> {
        let slot = self
            .rotate_interval
            .map_or(0, |i| u64::from(now) / u64::from(i.max(1)));
        let rotate = match &self.current {
            None => true,
            Some(c) => {
                c.slot != slot
                    || self
                        .rotate_size
                        .is_some_and(|max| c.octets > 0 && c.octets + len > max)
            }
        };
        if rotate {
            if let Some(mut c) = self.current.take() {
                c.writer.flush()?;
            }
            let at = match self.rotate_interval {
                Some(i) => slot * u64::from(i.max(1)),
                None => u64::from(now),
            };
            let mut path = PathBuf::from(file_name(&self.pattern, at));
            // A second file in the same second (a size rotation): numbered.
            if self.rotate_size.is_some() && path.exists() {
                let mut n = 1;
                let base = path.clone();
                while path.exists() {
                    path = PathBuf::from(format!("{}.{n}", base.display()));
                    n += 1;
                }
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut open = std::fs::OpenOptions::new();
            open.create(true);
            if std::mem::take(&mut self.fresh) {
                open.write(true).truncate(true);
            } else {
                open.append(true);
            }
            let f = open
                .open(&path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let octets = f.metadata().map_or(0, |m| m.len());
            tracing::info!(file = %path.display(), "BGP4MP log: writing");
            self.current = Some(Current {
                path,
                writer: MrtWriter::new(BufWriter::new(f)),
                octets,
                slot,
            });
        }
        let c = self
            .current
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no file"))?;
        c.octets += len;
        Ok(&mut c.writer)
    }

    /// A received message (BGP4MP MESSAGE_AS4, or _ADDPATH).
    pub fn message(
        &mut self,
        now: u32,
        session: &Bgp4mpSession,
        add_path: bool,
        message: &[u8],
    ) -> std::io::Result<()> {
        let len = 12 + 16 + 32 + message.len() as u64;
        self.writer(now, len)?
            .write_bgp4mp_message(now, session, add_path, message)
    }

    /// A session's state change (RFC 4271 FSM states, 1 Idle to 6 Established).
    pub fn state(
        &mut self,
        now: u32,
        session: &Bgp4mpSession,
        old: u16,
        new: u16,
    ) -> std::io::Result<()> {
        self.writer(now, 12 + 16 + 32 + 4)?
            .write_bgp4mp_state_change(now, session, old, new)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        match self.current.as_mut() {
            Some(c) => c.writer.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_pattern() {
        // 2026-11-26 21:15:07 UTC
        let t = 1_795_727_707;
        assert_eq!(file_name("updates.%Y%m%d.%H%M", t), "updates.20261126.2115");
        assert_eq!(file_name("u-%S%%-%q", t), "u-07%-%q");
    }

    #[test]
    fn files_rotate_by_interval_and_by_size() {
        let dir = std::env::temp_dir().join(format!("ribshard-updates-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pattern = format!("{}/u.%H%M%S", dir.display());
        let s = Bgp4mpSession {
            peer_as: 1,
            local_as: 2,
            peer: std::net::IpAddr::from([192, 0, 2, 1]),
            local: std::net::IpAddr::from([192, 0, 2, 2]),
        };
        let msg = [0xffu8; 100];
        let mut log = UpdatesLog::new(pattern.clone(), None, Some(900));
        let t0 = 1_795_727_700u32; // 21:15:00
        log.message(t0 + 10, &s, false, &msg).unwrap();
        log.state(t0 + 20, &s, 6, 1).unwrap();
        log.message(t0 + 900, &s, false, &msg).unwrap();
        log.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["u.211500", "u.213000"]);
        // The first file holds a message and a state change, both readable.
        let mut r = ribshard_mrt::open(dir.join("u.211500")).unwrap();
        let mut kinds = Vec::new();
        while let Some(raw) = r.next_record().unwrap() {
            kinds.push(raw.subtype);
        }
        assert_eq!(kinds, [4, 5]);
        let mut log = UpdatesLog::new(format!("{}/s", dir.display()), Some(350), None);
        for i in 0..5 {
            log.message(t0 + i, &s, false, &msg).unwrap();
        }
        log.flush().unwrap();
        let sized: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('s')
            })
            .collect();
        assert_eq!(sized.len(), 3, "two records of 160 octets a file");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
