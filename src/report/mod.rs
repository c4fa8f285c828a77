//! Reports: the result model (JSON), the text summary and the comparison table, file output.

pub mod result;
pub mod svg;
pub mod text;

use std::io::Write;
use std::path::{Path, PathBuf};

/// Current UTC time as `2026-12-02T17:40:05Z`.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d, h, mi, s) = crate::row::civil(secs as i64);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `results/20261202-174005-postgres.json`
pub fn default_path(dir: &Path, kind: &str) -> PathBuf {
    let t = now_rfc3339()
        .replace(['-', ':'], "")
        .replace('T', "-")
        .replace('Z', "");
    dir.join(format!("{t}-{kind}.json"))
}

/// Writes `bytes` to `path` through a temp file and a rename, so a kill at any moment leaves
/// either the old file or the whole new one, never a truncated result.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
