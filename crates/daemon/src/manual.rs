//! The manual pages: `ribshard.8` and a page per command group (`ribshard-show.8`, ...) from
//! the command line's own clap definitions, and `ribshard.toml.5` from the annotated example
//! configuration (every key with its meaning and default; a test loads the example, so the
//! page cannot name a key the daemon refuses). Written by `ribshard man --out DIR`, which the
//! package build runs; never by hand.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Writes `ribshard.8`, one page per subcommand and `ribshard.toml.5` into `dir`; returns
/// their paths.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let date = crate::cli::render::date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    );
    let day = date.get(..10).unwrap_or_default().to_string();
    let cmd = cmd.version(env!("CARGO_PKG_VERSION"));
    let mut page = |c: clap::Command, name: String| -> io::Result<()> {
        let path = dir.join(format!("{name}.8"));
        let mut out = Vec::new();
        // The title is the display name; the synopsis shows how it is typed.
        let typed = name.replacen('-', " ", 1);
        clap_mangen::Man::new(c.display_name(name).bin_name(typed))
            .section("8")
            .date(&day)
            .manual("ribshard")
            .source(format!("ribshard {}", env!("CARGO_PKG_VERSION")))
            .render(&mut out)?;
        std::fs::write(&path, out)?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        page(sub.clone(), format!("ribshard-{}", sub.get_name()))?;
    }
    page(cmd, "ribshard".into())?;
    let path = dir.join("ribshard.toml.5");
    std::fs::write(&path, config_page(crate::config::EXAMPLE, &day))?;
    written.push(path);
    Ok(written)
}

/// Text as roff reads it: backslashes and a leading dot or quote escaped.
fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    match s.chars().next() {
        Some('.' | '\'') => format!("\\&{s}"),
        _ => s,
    }
}

/// `ribshard.toml(5)`: the example's comments as paragraphs, each table a section, each key
/// with its example value and its own comment.
pub fn config_page(example: &str, date: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        ".TH RIBSHARD.TOML 5 \"{date}\" \"ribshard {}\" \"ribshard\"",
        env!("CARGO_PKG_VERSION")
    );
    o.push_str(".SH NAME\nribshard.toml \\- configuration file of the ribshard BGP daemon\n");
    o.push_str(".SH SYNOPSIS\n/etc/ribshard/ribshard.toml\n");
    o.push_str(".SH DESCRIPTION\n");
    let mut para: Vec<String> = Vec::new();
    let flush = |o: &mut String, para: &mut Vec<String>| {
        if !para.is_empty() {
            o.push_str(".PP\n");
            o.push_str(&roff(&para.join(" ")));
            o.push('\n');
            para.clear();
        }
    };
    for line in example.lines() {
        let t = line.trim();
        if t.is_empty() {
            flush(&mut o, &mut para);
        } else if let Some(c) = t.strip_prefix('#') {
            let c = c.trim();
            // A key left commented out: its default, shown as a setting.
            let key = c.split_once(" = ").map(|(k, _)| k);
            if key.is_some_and(|k| {
                !k.is_empty() && k.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-')
            }) {
                flush(&mut o, &mut para);
                let (setting, comment) = match c.split_once(" #") {
                    Some((s, m)) => (s.trim(), m.trim()),
                    None => (c, ""),
                };
                let _ = writeln!(o, ".TP\n\\fB{}\\fR (not set in the example)", roff(setting));
                if !comment.is_empty() {
                    let _ = writeln!(o, "{}", roff(comment));
                }
            } else {
                para.push(c.to_string());
            }
        } else if t.starts_with('[') {
            flush(&mut o, &mut para);
            let _ = writeln!(o, ".SS {}", roff(t));
        } else {
            flush(&mut o, &mut para);
            let (setting, comment) = match t.split_once(" #") {
                Some((s, c)) => (s.trim(), c.trim()),
                None => (t, ""),
            };
            let _ = writeln!(o, ".TP\n\\fB{}\\fR", roff(setting));
            if !comment.is_empty() {
                let _ = writeln!(o, "{}", roff(comment));
            }
        }
    }
    flush(&mut o, &mut para);
    o.push_str(
        ".SH FILES\n.TP\n/etc/ribshard/ribshard.toml\nthe configuration the packaged service reads\n",
    );
    o.push_str(
        ".SH SEE ALSO\n\\fBribshard\\fR(8); `ribshard config example` prints this example, \
         `ribshard config check FILE` checks a file, naming each error's line and key.\n",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_page_has_every_table_and_key_of_the_example() {
        let page = config_page(crate::config::EXAMPLE, "2026-11-27");
        assert!(page.starts_with(".TH RIBSHARD.TOML 5"));
        assert!(page.contains(".SS [bgp]\n"));
        assert!(page.contains("\\fBlocal\\-as = 65000\\fR\nour AS"));
        for line in crate::config::EXAMPLE.lines() {
            let t = line.trim();
            if t.starts_with("[") {
                assert!(page.contains(&format!(".SS {}", roff(t))), "{t}");
            }
        }
    }
}
