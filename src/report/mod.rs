//! Reports of the result model (`crate::result`): the text summary and the comparison table,
//! SVG charts, the HTML page, file output.

pub mod html;
pub mod output;
mod short_target;
pub mod svg;
pub mod text;

use std::path::{Path, PathBuf};

/// Current UTC time as `2026-12-02T17:40:05Z`.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d, h, mi, s) = crate::date::civil(secs as i64);
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
