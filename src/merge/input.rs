//! One input of a merge: a name and its parsed result file.

use crate::result::ResultFile;

/// One input: a name (its instance or file name) and the parsed file.
pub struct Input {
    pub name: String,
    pub file: ResultFile,
}
