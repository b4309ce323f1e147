//! Memory per path: heap bytes one shard keeps for the two real full tables of the 2010
//! RouteViews RIB (641,957 paths), attribute sets included, counted by a wrapping allocator;
//! and the RSS delta. Written to `target/criterion/memory.json`.
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
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
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
}
