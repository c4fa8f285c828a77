//! The command line as clap reads it: the subcommands, their flags and help text.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use loadgen::date::parse_rfc3339;
use loadgen::keys::Dist;
use loadgen::mix::Mix;
use loadgen::plan::{parse_count, parse_duration, parse_key_range};
use loadgen::sweep::Slo;

#[derive(Parser)]
#[command(
    name = "loadgen",
    version,
    about = "Point-lookup load tester: maximum QPS and latency of SELECT ... WHERE id = $1 \
against PostgreSQL, MariaDB/MySQL, HandlerSocket, memcached, Redis and HTTP key-value endpoints."
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Cmd {
    /// Drive lookups at one or more targets and report QPS and latency.
    Run(RunArgs),
    /// Load the rows that --verify expects: the usr table (from schemas/) in an SQL server,
    /// usr:<id> keys in a key-value store.
    Prepare(PrepareArgs),
    /// Run the embedded HTTP key-value server on its own (GET /usr/<id>, GET /stats).
    Serve(ServeArgs),
    /// Merge result files from several generators: summed counts, exact percentiles from the merged histograms.
    Merge(MergeArgs),
    /// Render a result file (of a run, a sweep, an SLO search or `merge`) as one self-contained
    /// HTML page: summary, latency by percentile, QPS and latency over time, comparison charts.
    Report(ReportArgs),
    /// Compare two result files (B against A), or the targets of one: per target and op, the
    /// QPS and p50/p99/p99.9 differences in percent with 95% CIs, and faster, slower or no
    /// significant difference.
    Compare(CompareArgs),
    /// Read and parse a trace file (Twitter cache-trace CSV or a key list, .zst or plain) on one
    /// core and print how many lines per second that is: a replay can go no faster.
    TraceBench(TraceBenchArgs),
}

#[derive(Args)]
pub struct CompareArgs {
    /// A (the baseline) and B, result files of `loadgen run` or `merge`; one file of several
    /// targets compares each with its first.
    #[arg(required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// Compare files whose settings or targets differ (the report says what differs).
    #[arg(long)]
    pub force: bool,
    /// Exit 4 when a difference is significant and beyond its bound, e.g. 'qps<-5%,p99>+10%'
    /// (figures: qps, p50, p99, p99.9): a gate for performance regressions.
    #[arg(long, value_name = "CONDITIONS", value_parser = loadgen::compare::FailIf::parse)]
    pub fail_if: Option<loadgen::compare::FailIf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
}

#[derive(Args)]
pub struct TraceBenchArgs {
    /// The trace: `timestamp,key,key_size,value_size,client_id,op,ttl` lines or `key[,op]` lines,
    /// zstd-compressed or not.
    pub file: PathBuf,
}

#[derive(Args)]
pub struct ReportArgs {
    /// Result JSON file written by `loadgen run` or `loadgen merge`.
    pub file: PathBuf,
    /// The page [default: beside the file, FILE.html]; "-" or /dev/stdout: on stdout. A device or
    /// FIFO is written through, a symlink followed.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(Args)]
pub struct MergeArgs {
    /// Result JSON files written by `loadgen run`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Merged result file [default: print only]; "-" or /dev/stdout: the JSON on stdout, the text
    /// report on stderr. A device or FIFO is written through, a symlink followed (/dev/null: no file).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
}

#[derive(Args)]
pub struct RunArgs {
    #[arg(help = run_targets_help())]
    pub targets: Vec<String>,
    /// Connections, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 16)]
    pub connections: usize,
    #[arg(short = 'p', long, default_value_t = 1, help = pipeline_help())]
    pub pipeline: usize,
    /// Worker threads, each with its own runtime and connections [default: number of cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Measure for this long after the warm-up: seconds (10, 1.5) or with a unit (30s, 500ms, 2m) [default: 10s].
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Stop after exactly this many counted requests (20000, 20k, 1M).
    #[arg(short = 'n', long, value_parser = parse_count)]
    pub requests: Option<u64>,
    /// Run this long before counting [default: 1s with -d, 0 with -n].
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Key range FIRST-LAST, inclusive.
    #[arg(long, default_value = "1-1000000", value_parser = parse_key_range)]
    pub keys: (u64, u64),
    /// Key distribution: uniform, seq, zipf[:S] (S default 0.99), hot:F:P (fraction F of keys gets fraction P of lookups).
    #[arg(long, default_value = "uniform", value_parser = Dist::parse)]
    pub dist: Dist,
    /// SQL for SQL targets, with $1 (PostgreSQL) or ? (MySQL) for the key
    /// [default: SELECT user_name, user_email, created FROM usr WHERE user_id = $1].
    #[arg(long)]
    pub query: Option<String>,
    /// prepared: statement prepared once per connection; simple: key inlined, parsed each time (as pgbench -M).
    #[arg(long, value_enum, default_value_t = ModeArg::Prepared)]
    pub mode: ModeArg,
    /// Check every returned row against the row derived from its key; a wrong row is a verify error.
    #[arg(long)]
    pub verify: bool,
    /// A request with no reply after this long is a timeout error and its connection is replaced.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Progress line, timeline row and metrics update interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Seed of the key streams (same seed, same keys per connection).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fixed total rate in requests/s (open loop; latency measured from each request's due time).
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Arrival process with --rate: uniform (evenly spaced) or poisson.
    #[arg(long, value_enum, default_value_t = ArrivalArg::Uniform)]
    pub arrival: ArrivalArg,
    /// First and longest wait between reconnect attempts, MIN,MAX (capped exponential backoff).
    #[arg(long, default_value = "10ms,1s")]
    pub reconnect_backoff: String,
    /// End the run early (exit 1) once this many errors were counted.
    #[arg(long)]
    pub max_errors: Option<u64>,
    /// Run until the 95% CIs are this narrow, -d the longest (e.g. 2% for QPS, or
    /// qps=1%,p99=5%; figures: qps, p50, p90, p99, p99.9): half-widths as a share of each figure,
    /// checked each interval from the tenth whole one on.
    #[arg(long, value_name = "GOAL", value_parser = loadgen::stats::Goal::parse)]
    pub ci: Option<loadgen::stats::Goal>,
    /// Exit 3 when a run's verdict is not valid (see the `verdict` line of the report).
    #[arg(long)]
    pub strict: bool,
    /// Ops and their weights, e.g. read=90,update=10 (ops: read, update, insert, delete, upsert,
    /// and mget:N, a multi-get of N keys as --batch N sends: read=50,mget:10=50).
    /// Updates and deletes take keys from --dist; inserts take new keys from --insert-from up.
    #[arg(long, default_value = "read=100", value_parser = Mix::parse)]
    pub mix: Mix,
    /// Replay the requests of a trace file instead of drawing them: Twitter cache-trace lines
    /// (`timestamp,key,key_size,value_size,client_id,op,ttl`, .zst or plain) at their own pace,
    /// or a `key` / `key,op` list (as fast as the connections go, or at -R). The run ends with
    /// the trace; -d cuts it short. memcached and Redis get the keys as written, with the
    /// trace's value sizes and TTLs; the others the id a key names (see the README).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write every request the run sends to FILE as a Twitter cache-trace line (time, key as
    /// the target names it, value size, connection, op, ttl), for `--trace FILE` to replay.
    #[arg(long, value_name = "FILE")]
    pub record_trace: Option<PathBuf>,
    /// Bytes each write stores on memcached and Redis: a size (55), a uniform range (100-1000)
    /// or sizes with weights (100:80,4000:20). A value is the row, a tab and filler, so --verify
    /// still checks it (a value is then never shorter than its row).
    #[arg(long, value_name = "SIZES", value_parser = |s: &str| loadgen::value_size::ValueSize::parse(s).map_err(|e| e.0))]
    pub value_size: Option<loadgen::value_size::ValueSize>,
    /// memcached and Redis: how keys name ids, printf-style with one %d or %0Nd, to read data
    /// another tool loaded: key:%012d (redis-benchmark -r), memtier-%d (memtier_benchmark)
    /// [default: usr:%d]. `prepare --key-format` loads keys so named.
    #[arg(long, value_name = "FORMAT", value_parser = parse_key_format)]
    pub key_format: Option<loadgen::key_format::KeyFormat>,
    /// Run an earlier result's targets and settings again (its seed too, so the same keys),
    /// and say so with the whole command line; flags and targets given here override the file's.
    #[arg(long, value_name = "RESULT.json")]
    pub repeat: Option<PathBuf>,
    /// With --trace: replay X times faster than the trace's timestamps (0.5: half as fast).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub speed: f64,
    /// First key inserts take [default: SQL: max(id) + 1 of the table; others: above --keys].
    /// Connections (and --instance names) take interleaved keys from there, so they never clash.
    #[arg(long)]
    pub insert_from: Option<u64>,
    /// Writes per transaction on SQL targets: each connection groups its writes N at a time
    /// (reads of the mix ride along); 1 is autocommit, every write its own transaction.
    #[arg(long, default_value_t = 1)]
    pub txn: usize,
    /// Keys per request: each request reads N keys drawn from --dist in the target's own
    /// multi-get (memcached `get k1 ... kN`, Redis `MGET`); the report counts requests and keys apart.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Close each connection and open it again after every N requests (as pgbench -C does
    /// after each transaction), so connect, login and TLS handshakes are measured too: the
    /// report shows connect latency beside request latency.
    #[arg(long, value_parser = parse_count)]
    pub reconnect_every: Option<u64>,
    /// Times a transaction (--txn) or write that fails with a deadlock or serialization failure
    /// is sent again on its connection, like pgbench --max-tries; its latency runs from its
    /// first try. PostgreSQL 40P01, 55P03 and 40001; MySQL 1213 and 1205. Needs -p 1.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Seconds every write lives: memcached exptime, Redis `SET ... EX`; 0: forever. At most
    /// 30 days (memcached reads more as a date). The other targets have no expiry and refuse it.
    #[arg(long, default_value_t = 0, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(0..=2_592_000))]
    pub ttl: u32,
    /// SQL for updates [PostgreSQL default: UPDATE usr SET user_name = $2 WHERE user_id = $1;
    /// MySQL: ? placeholders in this order: user_name, key; for the others as numbered here].
    #[arg(long)]
    pub query_update: Option<String>,
    /// SQL for inserts, $1..$4: key, user_name, user_email, created [default: INSERT INTO usr ...].
    #[arg(long)]
    pub query_insert: Option<String>,
    /// SQL for deletes, $1 the key [default: DELETE FROM usr WHERE user_id = $1].
    #[arg(long)]
    pub query_delete: Option<String>,
    /// SQL for upserts, $1..$4 as --query-insert [default: INSERT ... ON CONFLICT (user_id) DO UPDATE].
    #[arg(long)]
    pub query_upsert: Option<String>,
    /// Result JSON file [default: results/<time>-<kind>.json, <kind> compare/sweep/slo for those];
    /// "-" or /dev/stdout: the JSON on stdout, the text report on stderr. A device or FIFO is
    /// written through, a symlink followed; /dev/null writes nothing.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Serve Prometheus metrics on this address while running (GET /metrics), e.g. 127.0.0.1:9464.
    #[arg(long)]
    pub metrics: Option<String>,
    /// Keep serving metrics this long after the run, so the last values are scraped.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub metrics_linger: Duration,
    /// Extra label on every metric, KEY=VALUE (repeatable).
    #[arg(long)]
    pub run_label: Vec<String>,
    /// Name of this generator in results and metrics, when several run together.
    #[arg(long)]
    pub instance: Option<String>,
    /// Start at this time (RFC 3339, e.g. 2026-12-02T17:40:00Z), so generators on several machines begin together.
    #[arg(long, value_parser = parse_rfc3339)]
    pub start_at: Option<f64>,
    /// Also write the latency as an HdrHistogram interval log (V2, compressed) to this file
    /// (written as it goes; a device, FIFO or /dev/stderr is written through; not stdout).
    #[arg(long)]
    pub hdr_log: Option<PathBuf>,
    /// The server's main process (e.g. the postmaster), for the server CPU per request in the
    /// report [default: the process listening on the target's port, when it is on this machine].
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// One closed-loop step per connection count (e.g. 1,2,4,8,16,32,64,128,256): table of QPS, p50, p99 and the peak, and with --mix each write op's rate and time per 10,000; -d/-n apply to each step.
    #[arg(long, value_parser = parse_sweep, conflicts_with_all = ["slo", "rate"])]
    pub sweep: Option<Counts>,
    /// Find the highest fixed rate whose latency percentile stays under a bound, e.g. p99=1ms (bisection; each step runs -d).
    #[arg(long, value_parser = Slo::parse, conflicts_with = "rate")]
    pub slo: Option<Slo>,
}

/// Connection counts of a sweep (a newtype so clap takes the list as one value).
#[derive(Clone, Debug)]
pub struct Counts(pub Vec<usize>);

fn parse_sweep(s: &str) -> Result<Counts, String> {
    let bad = || format!("bad --sweep '{s}': use connection counts like 1,2,4,8,16");
    let v: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if v.is_empty() {
        return Err(bad());
    }
    Ok(Counts(v))
}

#[derive(Args)]
pub struct PrepareArgs {
    /// A sharded SQL target is several URLs, each with its ids: `?keys=FROM-TO`.
    #[arg(help = prepare_target_help(), required = true, num_args = 1..)]
    pub targets: Vec<String>,
    /// Rows to load (ids 1..=N).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    pub rows: u64,
    /// memcached and Redis: the keys' names, printf-style (see `run --key-format`).
    #[arg(long, value_name = "FORMAT", value_parser = parse_key_format)]
    pub key_format: Option<loadgen::key_format::KeyFormat>,
}

fn parse_key_format(s: &str) -> Result<loadgen::key_format::KeyFormat, String> {
    loadgen::key_format::KeyFormat::parse(s).map_err(|e| e.0)
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on (127.0.0.1 unless you mean otherwise).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Listen on this Unix socket instead (the target is then
    /// http+unix://%2Fpath%2Fto.sock/usr/{key}); removed again on Ctrl-C.
    #[arg(long, value_name = "PATH", conflicts_with = "addr")]
    pub unix: Option<std::path::PathBuf>,
    /// Rows to hold (ids 1..=N).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    pub rows: u64,
    /// Server threads [default: number of cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Fixed service time added to every answer, like 2ms (a server of known capacity:
    /// C connections answer at most C/DELAY requests a second).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<std::time::Duration>,
    /// Answers take 1 ms more for this long from the first request, like 3s: a server that
    /// warms up (a cold cache), to see a too short --warmup named in the verdict.
    #[arg(long, value_parser = parse_duration)]
    pub cold: Option<std::time::Duration>,
    /// With --delay: every EPOCH the delay takes a new factor drawn in [1 - AMP, 1 + AMP], like
    /// 50%,500ms: a server whose speed wanders, to see a run's CIs widen (and --ci take longer).
    #[arg(long, value_name = "AMP,EPOCH")]
    pub noise: Option<String>,
    /// With --delay: the delay grows by this share of itself each second from the first request,
    /// like 5% (1.5x after 10 s): a server that slows through a run, to see the verdict's drift.
    #[arg(long, value_name = "PCT")]
    pub drift: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Prepared,
    Simple,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ArrivalArg {
    Uniform,
    Poisson,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
}

/// The target lists come from the protocol table, so a new protocol shows up here by itself.
fn run_targets_help() -> String {
    format!(
        "Target URLs, run one after another with the same settings and key stream. None: the \
         embedded server.{}\nOptions go in the query (?driver=wire); an unknown one is \
         refused, except on http://, where params other than loadgen's are the server's and \
         are sent (?format=raw).\n{SETS}",
        forms_list(false)
    )
}

/// Targets that are sets of servers, for both `run` and `prepare`.
const SETS: &str = "Sets of servers: memcache://h1:p1,h2:p2 (a ketama pool), \
    redis://h:p?cluster=1 (a Redis Cluster), and SQL shards: consecutive URLs each with the ids \
    it holds, postgres://h1/db?keys=1-500000 postgres://h2/db?keys=500001-1000000. A memcached \
    proxy (twemproxy) is counted by the servers it fronts: memcache://proxy?behind=h1:p1,h2:p2.";

/// The URL forms one protocol a line, its TLS form on the next: a list a person can scan.
fn forms_list(loadable: bool) -> String {
    let mut out = String::new();
    for (forms, tls) in loadgen::proto::table::url_forms(loadable) {
        out.push_str(&format!("\n  {forms}"));
        if let Some(t) = tls {
            out.push_str(&format!("\n      TLS: {t}"));
        }
    }
    out
}

fn pipeline_help() -> String {
    let (yes, no) = loadgen::proto::table::pipelining();
    format!(
        "Requests in flight per connection, pipelined on {yes} (a library driver that cannot \
         pipeline, {no}, refuses -p > 1)."
    )
}

fn prepare_target_help() -> String {
    format!(
        "Target URL, one of:{}\nHandlerSocket reads the MySQL table; http:// serves what is there.\n{SETS}",
        forms_list(true)
    )
}
