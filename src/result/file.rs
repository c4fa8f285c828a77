//! The result document: what `--format json` prints and what `results/*.json` holds.
//! Its JSON schema is `schemas/result.schema.json`; a test checks real output against it.

use serde::{Deserialize, Serialize};

use super::run::RunResult;
use super::slo::SloResult;
use super::sweep::SweepResult;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResultFile {
    pub loadgen_version: String,
    pub started_at: String,
    pub interrupted: bool,
    pub settings: Settings,
    pub machine: Machine,
    /// `--instance`: which generator wrote this (when several run together).
    #[serde(default)]
    pub instance: Option<String>,
    pub runs: Vec<RunResult>,
    /// `--sweep`: one table per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<SweepResult>,
    /// `--slo`: the search per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloResult>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub connections: usize,
    pub pipeline: usize,
    pub threads: usize,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub keys: String,
    pub dist: String,
    pub mode: String,
    pub verify: bool,
    pub timeout_ms: u64,
    pub interval_ms: u64,
    pub seed: u64,
    /// A merge of generators whose seeds differ: every one of them (`seed` is the first's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<Vec<u64>>,
    pub rate: Option<f64>,
    /// Optional in the schema (older files lack it).
    #[serde(default)]
    pub arrival: String,
    pub query: Option<String>,
    /// `--mix` unless it is one-key reads only (`read=90,update=10`, `read=50,mget:10=50`);
    /// absent for a read-only run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<String>,
    /// `--txn` when above 1 (writes per transaction); absent for autocommit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<usize>,
    /// `--batch` when above 1: keys per request (a multi-get); absent for one key per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// `--retries` when above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// `--ttl` when above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    /// `--reconnect-every` when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_every: Option<u64>,
    /// `--key-format` when given (`key:%012d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_format: Option<String>,
    /// `--value-size` as given (`100:80,4000:20`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_size: Option<String>,
    /// The SQL of each write op given by `--query-<op>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_queries: Option<std::collections::BTreeMap<String, String>>,
    /// `--reconnect-backoff` MIN,MAX in microseconds; absent in older files (10ms,1s then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_backoff_us: Option<[u64; 2]>,
    /// `--max-errors` when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_errors: Option<u64>,
    /// `--ci` when given, as it reads back (`qps=1%,p99=5%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<String>,
    /// `--insert-from` when given (with `--instance`, of the file, it sets the insert keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_from: Option<u64>,
    /// `--trace`: the replayed file; absent for a run that draws its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSettings>,
}

/// The trace a run replayed: the file, its requests and span as written, and `--speed`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceSettings {
    pub file: String,
    pub lines: u64,
    pub span_s: f64,
    pub speed: f64,
    /// The trace's lines carry timestamps, which set the pace (unless -R).
    pub timed: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub os: String,
    #[serde(default)]
    pub hostname: String,
}
