//! Placeholder: the HdrHistogram interval log writer lands here (issue 9).
use std::path::Path;

pub struct IntervalLog;

impl IntervalLog {
    pub fn create(_path: &Path) -> Result<IntervalLog, String> {
        Err("--hdr-log is not implemented yet".into())
    }
    pub fn hook(&self) -> crate::run::Hook {
        std::sync::Arc::new(|_| {})
    }
    pub fn finish(&self) -> Result<(), String> {
        Ok(())
    }
}
