//! The result model: what a run, a sweep and an SLO search produce, as written to JSON
//! (`schemas/result.schema.json`) and read back by `merge`. Data types only: this module imports
//! nothing from the rest of the crate, so everything that produces results (the collector, merge)
//! or renders them (`report`) sits above it. Building a result from totals is the collector's
//! job; formatting is the text report's.

mod file;
mod histogram;
mod percentiles;
mod run;
mod slo;
mod sweep;
mod timeline;
mod verdict;

pub use file::{Machine, ResultFile, Settings, TraceSettings};
pub use histogram::{base64_decode, base64_encode, decode_histogram, encode_histogram};
pub use percentiles::Percentiles;
pub use run::{
    count_matches, sent_text, ClientCpu, KeysResult, MemberObserved, OpResult, RateResult,
    Redirects, RunResult, ServerCpu, ServerObserved, TlsUsed, SATURATED_SHARE,
};
pub use slo::{SloResult, SloStep};
pub use sweep::{StepServer, SweepResult, SweepStep};
pub use timeline::TimelineRow;
pub use verdict::{MachineLoad, Verdict};
