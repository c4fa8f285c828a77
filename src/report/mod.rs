//! Reports of the result model (`crate::result`): the text summary and the comparison table,
//! SVG charts, the HTML page (files are written by `crate::output`).

pub mod html;
mod short_target;
pub mod svg;
pub mod text;

use std::path::{Path, PathBuf};

/// `results/20261202-174005-postgres.json`
pub fn default_path(dir: &Path, kind: &str) -> PathBuf {
    let t = crate::date::now_rfc3339()
        .replace(['-', ':'], "")
        .replace('T', "-")
        .replace('Z', "");
    dir.join(format!("{t}-{kind}.json"))
}
