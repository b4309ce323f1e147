//! Memory per path: heap bytes one shard keeps for the two real full tables of the 2010
//! RouteViews RIB (641,957 paths), attribute sets included, counted by a wrapping allocator;
//! and the RSS delta. Written to `target/criterion/memory.json`. Then where a daemon's memory
//! goes for the same tables, part by part, by the same allocator: the interned attribute
//! sets, the shard's table, each session's Adj-RIB-In index, one update group's export cache,
//! a table dump's grouping and the encoded table for one member. Written to
//! `target/criterion/memory-parts.json`.
//!
//! `cargo bench -p ribshard-engine --bench memory`

#[path = "../tests/common/realdata.rs"]
mod realdata;

use realdata::{into_shard, load};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts live heap bytes, for the memory report.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most `LIVE` has been since [`PEAK`] was last set: what a transient part costs at its
/// height, not only what it keeps.
static PEAK: AtomicIsize = AtomicIsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let grow = new as isize - l.size() as isize;
        PEAK.fetch_max(
            LIVE.fetch_add(grow, Ordering::Relaxed) + grow,
            Ordering::Relaxed,
        );
        System.realloc(p, l, new)
    }
}
#[global_allocator]
static A: Counting = Counting;

fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|x| x.parse::<usize>().ok())
        .unwrap_or(0)
        * 4096
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // Load again with nothing else alive: what the shard keeps, attribute sets included.
    let heap0 = LIVE.load(Ordering::Relaxed);
    let rss0 = rss();
    let tables = load(&[2497, 4777]).unwrap_or_default();
    let shard = into_shard(&tables);
    drop(tables);
    let heap = LIVE.load(Ordering::Relaxed) - heap0;
    let rss_delta = rss().saturating_sub(rss0);
    // The input tables are freed, but the allocator keeps their pages; given back, the RSS
    // delta is what the shard holds, allocator overhead and table slack included.
    // SAFETY: malloc_trim only returns free memory to the OS.
    unsafe { libc::malloc_trim(0) };
    let rss_trimmed = rss().saturating_sub(rss0);
    let paths = shard.paths();
    let per_path = heap as f64 / paths as f64;
    let per_path_rss = rss_delta as f64 / paths as f64;
    let per_path_trimmed = rss_trimmed as f64 / paths as f64;
    println!(
        "memory: {} paths, {} prefixes: {:.1} heap bytes per path, {:.1} RSS bytes per path, {:.1} after malloc_trim",
        shard.paths(),
        shard.prefixes(),
        per_path,
        per_path_rss,
        per_path_trimmed
    );
    let parts = breakdown();
    for (part, bytes) in &parts {
        println!(
            "memory part: {part}: {:.1} MiB",
            *bytes as f64 / (1 << 20) as f64
        );
    }
    // Bench binaries run in the package directory: write beside criterion's results.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/criterion");
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(
        format!("{dir}/memory.json"),
        format!(
            "{{\"paths\": {}, \"prefixes\": {}, \"heap_bytes_per_path\": {per_path:.1}, \"rss_bytes_per_path\": {per_path_rss:.1}, \"rss_trimmed_bytes_per_path\": {per_path_trimmed:.1}}}\n",
            shard.paths(),
            shard.prefixes()
        ),
    );
    let rows: Vec<String> = parts
        .iter()
        .map(|(part, bytes)| format!("[\"{part}\", {bytes}]"))
        .collect();
    let _ = std::fs::write(
        format!("{dir}/memory-parts.json"),
        format!("{{\"parts\": [{}]}}\n", rows.join(", ")),
    );
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Heap bytes of each part a daemon holds for the two tables (one shard, one downstream
/// group), measured as each is built with the others kept.
fn breakdown() -> Vec<(&'static str, isize)> {
    use ribshard_engine::session::adj_index::AdjIndex;
    use ribshard_rib::{ExportCache, ExportKinds};
    let mut parts = Vec::new();
    let at = live();
    let Some(tables) = load(&[2497, 4777]) else {
        return parts;
    };
    // The tables as loaded: their route lists (not kept by a daemon) and the sets interned.
    let lists: isize = tables
        .iter()
        .map(|t| (t.routes.capacity() * std::mem::size_of_val(&t.routes[0])) as isize)
        .sum();
    parts.push(("interned attribute sets", live() - at - lists));
    let at = live();
    let shard = into_shard(&tables);
    parts.push(("shard table (Loc-RIB and Adj-RIB-In paths)", live() - at));
    let at = live();
    let indexes: Vec<AdjIndex> = tables
        .iter()
        .map(|t| {
            let mut i = AdjIndex::default();
            for (n, _) in &t.routes {
                i.insert(*n);
            }
            i
        })
        .collect();
    parts.push(("sessions' Adj-RIB-In indexes (both)", live() - at));
    let at = live();
    PEAK.store(at, Ordering::Relaxed);
    let order = shard.reported_by_set();
    parts.push(("a table dump's grouping (transient)", live() - at));
    parts.push((
        "a table dump's grouping, at its height while built (transient)",
        PEAK.load(Ordering::Relaxed) - at,
    ));
    let at = live();
    let spec = realdata::downstream();
    // As the daemon's: of a kind, so the results go on the sets (their slots are counted
    // with the sets above; this part is the results themselves).
    let kinds = std::sync::Arc::new(ExportKinds::default());
    let mut cache = ExportCache::of_kind(kinds.for_spec(&spec));
    for (i, s) in order.sets.iter().enumerate() {
        let src = shard.peer(s.key.1);
        let first = order.places_of(i, 0).first();
        if let Some(p) = first.and_then(|at| shard.dump_prefix(*at)) {
            drop(cache.get(&spec, &src, s.key.1, &s.attrs, &p));
        }
    }
    parts.push(("one update group's export cache", live() - at));
    drop((indexes, order, cache, shard, tables));
    parts
}
