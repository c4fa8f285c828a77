//! Placeholder: `loadgen merge` lands here (issue 9).
use std::path::PathBuf;

use crate::report::result::ResultFile;

pub fn merge_files(_paths: &[PathBuf]) -> Result<ResultFile, String> {
    Err("merge is not implemented yet".into())
}
