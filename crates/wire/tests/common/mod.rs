//! Shared helpers for tests that read the real routing data in `../shared/data`.

use std::path::PathBuf;

/// `../shared/data` beside the repository, if present.
pub fn shared_data() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    dir.is_dir().then_some(dir)
}

/// A data file, or `None` with a printed reason so the skip is visible in test output.
pub fn data_file(name: &str) -> Option<PathBuf> {
    let Some(dir) = shared_data() else {
        eprintln!("SKIPPED: ../shared/data is absent (a user without the real data)");
        return None;
    };
    let f = dir.join(name);
    if !f.is_file() {
        eprintln!("SKIPPED: {} is absent", f.display());
        return None;
    }
    Some(f)
}
