//! The HTML pages the exporter serves on `/`, handed to it from above.

/// The pages `/` serves, with the Content-Security-Policy of each: made by the report, above
/// this module, and handed down so that metrics does not import it.
#[derive(Clone, Copy)]
pub struct Pages {
    /// The live page around the JSON `/live.json` serves.
    pub live: fn(&str) -> String,
    pub live_csp: &'static str,
    /// The finished run's report.
    pub report: fn(&crate::result::ResultFile) -> String,
    pub report_csp: &'static str,
}
