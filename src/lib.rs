//! loadgen: a load tester for point lookups (`SELECT ... WHERE id = $1`) against PostgreSQL,
//! MariaDB/MySQL, HandlerSocket, memcached, Redis and HTTP key-value endpoints.
//!
//! Data flow: the binary turns flags into a [`plan::Plan`]; [`app::execute`] runs each target
//! through `dispatch::run_target`, which finds the protocol in [`proto::table`] and calls the
//! generic `target_run::run` with that protocol's target. That starts one `worker` thread per core;
//! each owns a current_thread runtime, its connections ([`proto::target::Conn`]) and a
//! [`recorder::Recorder`]. The only request loop is `worker::drive`: keys from [`keys`], due
//! times from [`pacer`]. Every interval each worker hands a [`recorder::Snapshot`] to the
//! `collector`, which merges them into `totals::Totals` and feeds the hooks of `control`
//! (the progress line, [`metrics`], `hdrlog`). The result is a [`result::RunResult`] (the model,
//! below everything), written as JSON (schema in `schemas/`) and printed as text by [`report`].
//! Each protocol lives in its own folder under `proto/`; every connection it opens goes through
//! `transport` (TCP or a Unix socket); [`dataset`] alone knows the row a key should return.

pub mod app;
mod cells;
mod collector;
pub mod compare;
mod control;
mod cpu;
pub mod dataset;
pub mod date;
mod decimal;
mod dispatch;
mod downsample;
pub mod error;
mod fdlimit;
mod group;
mod hdrlog;
mod idle;
pub mod key_format;
pub mod keys;
mod machine;
pub mod merge;
pub mod metrics;
pub mod mix;
pub mod outcome;
pub mod output;
pub mod pacer;
pub mod plan;
pub mod prepare;
pub mod proto;
pub mod recorder;
mod redact;
pub mod repeat;
pub mod report;
pub mod result;
pub mod serve;
mod server_stats;
pub mod shown;
pub mod signals;
pub mod sink;
pub mod stats;
pub mod sweep;
mod target_run;
#[cfg(test)]
mod test_dir;
mod timeouts;
mod timer;
mod totals;
pub mod trace;
mod transport;
pub mod url;
pub mod value_size;
pub mod verdict;

mod worker;
