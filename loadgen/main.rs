//! The loadgen command line: flags -> Plan -> library -> print -> exit code.
//! Exit codes: 0 success, 1 the run finished but saw errors (or stopped early), 2 bad input or
//! setup failure (one line on stderr, never a panic or a stack trace), 3 with `--strict` when a
//! run's verdict is not valid.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use loadgen::app::{self, Format, Model, RunOptions};
use loadgen::date::parse_rfc3339;
use loadgen::error::{Error, Exit};
use loadgen::keys::Dist;
use loadgen::mix::{Mix, Op};
use loadgen::pacer::Arrival;
use loadgen::plan::{parse_count, parse_duration, parse_key_range, Mode, Plan, Stop};
use loadgen::sweep::Slo;

#[derive(Parser)]
#[command(
    name = "loadgen",
    version,
    about = "Point-lookup load tester: maximum QPS and latency of SELECT ... WHERE id = $1 \
against PostgreSQL, MariaDB/MySQL, HandlerSocket, memcached, Redis and HTTP key-value endpoints."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
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
    /// Read and parse a trace file (Twitter cache-trace CSV or a key list, .zst or plain) on one
    /// core and print how many lines per second that is: a replay can go no faster.
    TraceBench(TraceBenchArgs),
}

#[derive(Args)]
struct TraceBenchArgs {
    /// The trace: `timestamp,key,key_size,value_size,client_id,op,ttl` lines or `key[,op]` lines,
    /// zstd-compressed or not.
    file: PathBuf,
}

#[derive(Args)]
struct ReportArgs {
    /// Result JSON file written by `loadgen run` or `loadgen merge`.
    file: PathBuf,
    /// The page [default: beside the file, FILE.html]; "-" or /dev/stdout: on stdout. A device or
    /// FIFO is written through, a symlink followed.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct MergeArgs {
    /// Result JSON files written by `loadgen run`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Merged result file [default: print only]; "-" or /dev/stdout: the JSON on stdout, the text
    /// report on stderr. A device or FIFO is written through, a symlink followed (/dev/null: no file).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
}

#[derive(Args)]
struct RunArgs {
    #[arg(help = run_targets_help())]
    targets: Vec<String>,
    /// Connections, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 16)]
    connections: usize,
    #[arg(short = 'p', long, default_value_t = 1, help = pipeline_help())]
    pipeline: usize,
    /// Worker threads, each with its own runtime and connections [default: number of cores].
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Measure for this long after the warm-up (30s, 500ms, 2m) [default: 10s].
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "requests")]
    duration: Option<Duration>,
    /// Stop after exactly this many counted requests (20000, 20k, 1M).
    #[arg(short = 'n', long, value_parser = parse_count)]
    requests: Option<u64>,
    /// Run this long before counting [default: 1s with -d, 0 with -n].
    #[arg(long, value_parser = parse_duration)]
    warmup: Option<Duration>,
    /// Key range FIRST-LAST, inclusive.
    #[arg(long, default_value = "1-1000000", value_parser = parse_key_range)]
    keys: (u64, u64),
    /// Key distribution: uniform, seq, zipf[:S] (S default 0.99), hot:F:P (fraction F of keys gets fraction P of lookups).
    #[arg(long, default_value = "uniform", value_parser = Dist::parse)]
    dist: Dist,
    /// SQL for SQL targets, with $1 (PostgreSQL) or ? (MySQL) for the key
    /// [default: SELECT user_name, user_email, created FROM usr WHERE user_id = $1].
    #[arg(long)]
    query: Option<String>,
    /// prepared: statement prepared once per connection; simple: key inlined, parsed each time (as pgbench -M).
    #[arg(long, value_enum, default_value_t = ModeArg::Prepared)]
    mode: ModeArg,
    /// Check every returned row against the row derived from its key; a wrong row is a verify error.
    #[arg(long)]
    verify: bool,
    /// A request with no reply after this long is a timeout error and its connection is replaced.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Progress line, timeline row and metrics update interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
    /// Seed of the key streams (same seed, same keys per connection).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fixed total rate in requests/s (open loop; latency measured from each request's due time).
    #[arg(short = 'R', long)]
    rate: Option<f64>,
    /// Arrival process with --rate: uniform (evenly spaced) or poisson.
    #[arg(long, value_enum, default_value_t = ArrivalArg::Uniform)]
    arrival: ArrivalArg,
    /// First and longest wait between reconnect attempts, MIN,MAX (capped exponential backoff).
    #[arg(long, default_value = "10ms,1s")]
    reconnect_backoff: String,
    /// End the run early (exit 1) once this many errors were counted.
    #[arg(long)]
    max_errors: Option<u64>,
    /// Exit 3 when a run's verdict is not valid (see the `verdict` line of the report).
    #[arg(long)]
    strict: bool,
    /// Ops and their weights, e.g. read=90,update=10 (ops: read, update, insert, delete, upsert,
    /// and mget:N, a multi-get of N keys as --batch N sends: read=50,mget:10=50).
    /// Updates and deletes take keys from --dist; inserts take new keys from --insert-from up.
    #[arg(long, default_value = "read=100", value_parser = Mix::parse)]
    mix: Mix,
    /// Replay the requests of a trace file instead of drawing them: Twitter cache-trace lines
    /// (`timestamp,key,key_size,value_size,client_id,op,ttl`, .zst or plain) at their own pace,
    /// or a `key` / `key,op` list (as fast as the connections go, or at -R). The run ends with
    /// the trace; -d cuts it short. memcached and Redis get the keys as written, with the
    /// trace's value sizes and TTLs; the others the id a key names (see the README).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write every request the run sends to FILE as a Twitter cache-trace line (time, key as
    /// the target names it, value size, connection, op, ttl), for `--trace FILE` to replay.
    #[arg(long, value_name = "FILE")]
    record_trace: Option<PathBuf>,
    /// Bytes each write stores on memcached and Redis: a size (55), a uniform range (100-1000)
    /// or sizes with weights (100:80,4000:20). A value is the row, a tab and filler, so --verify
    /// still checks it (a value is then never shorter than its row).
    #[arg(long, value_name = "SIZES", value_parser = |s: &str| loadgen::value_size::ValueSize::parse(s).map_err(|e| e.0))]
    value_size: Option<loadgen::value_size::ValueSize>,
    /// memcached and Redis: how keys name ids, printf-style with one %d or %0Nd, to read data
    /// another tool loaded: key:%012d (redis-benchmark -r), memtier-%d (memtier_benchmark)
    /// [default: usr:%d]. `prepare --key-format` loads keys so named.
    #[arg(long, value_name = "FORMAT", value_parser = parse_key_format)]
    key_format: Option<loadgen::key_format::KeyFormat>,
    /// Run an earlier result's targets and settings again (its seed too, so the same keys),
    /// and say so with the whole command line; flags and targets given here override the file's.
    #[arg(long, value_name = "RESULT.json")]
    repeat: Option<PathBuf>,
    /// With --trace: replay X times faster than the trace's timestamps (0.5: half as fast).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    speed: f64,
    /// First key inserts take [default: SQL: max(id) + 1 of the table; others: above --keys].
    /// Connections (and --instance names) take interleaved keys from there, so they never clash.
    #[arg(long)]
    insert_from: Option<u64>,
    /// Writes per transaction on SQL targets: each connection groups its writes N at a time
    /// (reads of the mix ride along); 1 is autocommit, every write its own transaction.
    #[arg(long, default_value_t = 1)]
    txn: usize,
    /// Keys per request: each request reads N keys drawn from --dist in the target's own
    /// multi-get (memcached `get k1 ... kN`, Redis `MGET`); the report counts requests and keys apart.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Close each connection and open it again after every N requests (as pgbench -C does
    /// after each transaction), so connect, login and TLS handshakes are measured too: the
    /// report shows connect latency beside request latency.
    #[arg(long, value_parser = parse_count)]
    reconnect_every: Option<u64>,
    /// Times a transaction (--txn) or write that fails with a deadlock or serialization failure
    /// is sent again on its connection, like pgbench --max-tries; its latency runs from its
    /// first try. PostgreSQL 40P01, 55P03 and 40001; MySQL 1213 and 1205. Needs -p 1.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Seconds every write lives: memcached exptime, Redis `SET ... EX`; 0: forever. At most
    /// 30 days (memcached reads more as a date). The other targets have no expiry and refuse it.
    #[arg(long, default_value_t = 0, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(0..=2_592_000))]
    ttl: u32,
    /// SQL for updates [PostgreSQL default: UPDATE usr SET user_name = $2 WHERE user_id = $1;
    /// MySQL: ? placeholders in this order: user_name, key; for the others as numbered here].
    #[arg(long)]
    query_update: Option<String>,
    /// SQL for inserts, $1..$4: key, user_name, user_email, created [default: INSERT INTO usr ...].
    #[arg(long)]
    query_insert: Option<String>,
    /// SQL for deletes, $1 the key [default: DELETE FROM usr WHERE user_id = $1].
    #[arg(long)]
    query_delete: Option<String>,
    /// SQL for upserts, $1..$4 as --query-insert [default: INSERT ... ON CONFLICT (user_id) DO UPDATE].
    #[arg(long)]
    query_upsert: Option<String>,
    /// Result JSON file [default: results/<time>-<kind>.json, <kind> compare/sweep/slo for those];
    /// "-" or /dev/stdout: the JSON on stdout, the text report on stderr. A device or FIFO is
    /// written through, a symlink followed; /dev/null writes nothing.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Serve Prometheus metrics on this address while running (GET /metrics), e.g. 127.0.0.1:9464.
    #[arg(long)]
    metrics: Option<String>,
    /// Keep serving metrics this long after the run, so the last values are scraped.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    metrics_linger: Duration,
    /// Extra label on every metric, KEY=VALUE (repeatable).
    #[arg(long)]
    run_label: Vec<String>,
    /// Name of this generator in results and metrics, when several run together.
    #[arg(long)]
    instance: Option<String>,
    /// Start at this time (RFC 3339, e.g. 2026-12-02T17:40:00Z), so generators on several machines begin together.
    #[arg(long, value_parser = parse_rfc3339)]
    start_at: Option<f64>,
    /// Also write the latency as an HdrHistogram interval log (V2, compressed) to this file
    /// (written as it goes; a device, FIFO or /dev/stderr is written through; not stdout).
    #[arg(long)]
    hdr_log: Option<PathBuf>,
    /// The server's main process (e.g. the postmaster), for the server CPU per request in the
    /// report [default: the process listening on the target's port, when it is on this machine].
    #[arg(long)]
    server_pid: Option<u32>,
    /// One closed-loop step per connection count (e.g. 1,2,4,8,16,32,64,128,256): table of QPS, p50, p99 and the peak, and with --mix each write op's rate and time per 10,000; -d/-n apply to each step.
    #[arg(long, value_parser = parse_sweep, conflicts_with_all = ["slo", "rate"])]
    sweep: Option<Counts>,
    /// Find the highest fixed rate whose latency percentile stays under a bound, e.g. p99=1ms (bisection; each step runs -d).
    #[arg(long, value_parser = Slo::parse, conflicts_with = "rate")]
    slo: Option<Slo>,
}

/// Connection counts of a sweep (a newtype so clap takes the list as one value).
#[derive(Clone, Debug)]
struct Counts(Vec<usize>);

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
struct PrepareArgs {
    /// A sharded SQL target is several URLs, each with its ids: `?keys=FROM-TO`.
    #[arg(help = prepare_target_help(), required = true, num_args = 1..)]
    targets: Vec<String>,
    /// Rows to load (ids 1..=N).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    rows: u64,
    /// memcached and Redis: the keys' names, printf-style (see `run --key-format`).
    #[arg(long, value_name = "FORMAT", value_parser = parse_key_format)]
    key_format: Option<loadgen::key_format::KeyFormat>,
}

fn parse_key_format(s: &str) -> Result<loadgen::key_format::KeyFormat, String> {
    loadgen::key_format::KeyFormat::parse(s).map_err(|e| e.0)
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (127.0.0.1 unless you mean otherwise).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// Listen on this Unix socket instead (the target is then
    /// http+unix://%2Fpath%2Fto.sock/usr/{key}); removed again on Ctrl-C.
    #[arg(long, value_name = "PATH", conflicts_with = "addr")]
    unix: Option<std::path::PathBuf>,
    /// Rows to hold (ids 1..=N).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    rows: u64,
    /// Server threads [default: number of cores].
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Fixed service time added to every answer, like 2ms (a server of known capacity:
    /// C connections answer at most C/DELAY requests a second).
    #[arg(long, value_parser = parse_duration)]
    delay: Option<std::time::Duration>,
    /// Answers take 1 ms more for this long from the first request, like 3s: a server that
    /// warms up (a cold cache), to see a too short --warmup named in the verdict.
    #[arg(long, value_parser = parse_duration)]
    cold: Option<std::time::Duration>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Prepared,
    Simple,
}

#[derive(Clone, Copy, ValueEnum)]
enum ArrivalArg {
    Uniform,
    Poisson,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
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

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Prepare(a) => cmd_prepare(a),
        Cmd::Serve(a) => cmd_serve(a),
        Cmd::Merge(a) => cmd_merge(a),
        Cmd::Report(a) => cmd_report(a),
        Cmd::TraceBench(a) => cmd_trace_bench(a),
    };
    // Every exit code is decided here, from `Exit` (loadgen::error).
    std::process::exit(match code {
        Ok(exit) => exit.code(),
        Err(e) => {
            // The last sink of every error: a server's message may echo a URL or a secret.
            eprintln!("loadgen: {}", loadgen::url::redact_text(&e.to_string()));
            e.exit().code()
        }
    });
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn plan_of(a: &RunArgs) -> Result<Plan, String> {
    let stop = match (a.duration, a.requests, &a.trace) {
        (_, Some(n), _) => Stop::Requests(n),
        (Some(d), None, _) => Stop::Duration(d),
        (None, None, Some(_)) => Stop::Trace,
        (None, None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    let warmup = a.warmup.unwrap_or(match (stop, &a.trace) {
        (Stop::Duration(_), None) => Duration::from_secs(1),
        _ => Duration::ZERO,
    });
    let trace = trace_of(a)?;
    let (lo, hi) = a.reconnect_backoff.split_once(',').ok_or_else(|| {
        format!(
            "bad --reconnect-backoff '{}': use MIN,MAX like 10ms,1s",
            a.reconnect_backoff
        )
    })?;
    let backoff = (parse_duration(lo)?, parse_duration(hi)?);
    if backoff.0 > backoff.1 || backoff.0.is_zero() {
        return Err(format!(
            "bad --reconnect-backoff '{}': MIN must be above 0 and at most MAX",
            a.reconnect_backoff
        ));
    }
    let plan = Plan {
        connections: a.connections,
        pipeline: a.pipeline,
        threads: a.threads.unwrap_or_else(loadgen::plan::default_threads),
        stop,
        warmup,
        keys: a.keys,
        dist: a.dist.clone(),
        query: a.query.clone(),
        mode: match a.mode {
            ModeArg::Prepared => Mode::Prepared,
            ModeArg::Simple => Mode::Simple,
        },
        verify: a.verify,
        timeout: a.timeout,
        interval: a.interval,
        seed: a.seed,
        rate: a.rate,
        arrival: match a.arrival {
            ArrivalArg::Uniform => Arrival::Uniform,
            ArrivalArg::Poisson => Arrival::Poisson,
        },
        reconnect_backoff: backoff,
        max_errors: a.max_errors,
        mix: trace
            .as_ref()
            .map_or_else(|| a.mix.clone(), |t| Mix::of_counts(&t.survey.ops)),
        insert_from: a.insert_from,
        instance: a.instance.clone(),
        write_queries: [
            (Op::Update, &a.query_update),
            (Op::Insert, &a.query_insert),
            (Op::Delete, &a.query_delete),
            (Op::Upsert, &a.query_upsert),
        ]
        .into_iter()
        .filter_map(|(op, q)| q.clone().map(|q| (op, q)))
        .collect(),
        txn: a.txn,
        batch: a.batch,
        reconnect_every: a.reconnect_every,
        retries: a.retries,
        ttl: a.ttl,
        trace,
        record_trace: a.record_trace.clone(),
        value_size: a.value_size.clone(),
        key_format: a.key_format.clone(),
    };
    plan.validate()?;
    Ok(plan)
}

/// `run --repeat FILE`: the file's flags, then the user's own (which override them), parsed
/// again as one command line and run.
fn cmd_repeat(path: &std::path::Path, targets_given: bool) -> Result<Exit, Error> {
    let mut given = Vec::new();
    let mut argv = std::env::args().skip_while(|a| a != "run").skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--repeat" => {
                argv.next();
            }
            a if a.starts_with("--repeat=") => {}
            _ => given.push(arg),
        }
    }
    let args = loadgen::repeat::args_of(path, &given, targets_given)?;
    let line: Vec<String> = ["loadgen", "run"]
        .into_iter()
        .map(String::from)
        .chain(args)
        .chain(given)
        .collect();
    // Retyped beside --repeat, a target may carry its password: shown masked, as everywhere.
    let shown: Vec<String> = line
        .iter()
        .map(|a| shell_word(&loadgen::url::redact_text(a)))
        .collect();
    eprintln!("loadgen: repeating {}: {}", path.display(), shown.join(" "));
    let cli = Cli::try_parse_from(&line).map_err(|e| {
        let first = e.to_string().lines().next().unwrap_or_default().to_string();
        format!(
            "--repeat {}: {}",
            path.display(),
            first.trim_start_matches("error: ")
        )
    })?;
    match cli.cmd {
        Cmd::Run(b) if b.repeat.is_none() => cmd_run(b),
        _ => Err(format!("--repeat {}: a repeat cannot repeat again", path.display()).into()),
    }
}

/// `a` as a shell reads it back: quoted when it holds anything but plain characters.
fn shell_word(a: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:/=@%+".contains(c);
    match !a.is_empty() && a.chars().all(plain) {
        true => a.to_string(),
        false => format!("'{}'", a.replace('\'', "'\\''")),
    }
}

/// `--trace`: the file read once (every line checked, its ops counted) before anything runs.
fn trace_of(a: &RunArgs) -> Result<Option<loadgen::plan::TracePlan>, String> {
    let Some(path) = &a.trace else {
        return Ok(None);
    };
    if !a.mix.read_only() {
        return Err(format!(
            "--trace replays the file's own ops, which --mix {} would change: leave --mix out",
            a.mix.name()
        ));
    }
    let survey = loadgen::trace::feed::Survey::read(path).map_err(|e| e.to_string())?;
    Ok(Some(loadgen::plan::TracePlan {
        path: path.clone(),
        speed: a.speed,
        survey,
    }))
}

fn cmd_run(a: RunArgs) -> Result<Exit, Error> {
    if let Some(path) = &a.repeat {
        return cmd_repeat(path, !a.targets.is_empty());
    }
    let plan = plan_of(&a)?;
    let format = match a.format {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
    };
    let opts = RunOptions {
        say: loadgen::sink::stderr(),
        targets: a.targets.clone(),
        output: a.output.clone(),
        format,
        progress: !a.quiet,
        embedded_rows: a.keys,
        hooks: Vec::new(),
        instance: a.instance.clone(),
        metrics: metrics_config(&a)?,
        hdr_log: a.hdr_log.clone(),
        start_at: a.start_at,
        server_pid: a.server_pid,
        model: match (&a.sweep, &a.slo) {
            (Some(c), _) => Model::Sweep(c.0.clone()),
            (None, Some(s)) => Model::Slo(s.clone()),
            (None, None) => Model::Single,
        },
    };
    let rt = runtime()?;
    let out = rt.block_on(async {
        let stop = app::stop_on_signals(loadgen::sink::stderr());
        app::execute(&plan, opts, stop).await
    });
    let mut out = out.map_err(|e| e.0)?;
    print_report(&out.file, format, doc_on_stdout(a.output.as_deref()));
    if let Some(p) = &out.path {
        let beside: Vec<String> = [("report", &out.report), ("chart", &out.chart)]
            .iter()
            .filter_map(|(what, f)| f.as_ref().map(|f| format!("{what}: {}", f.display())))
            .collect();
        let beside = if beside.is_empty() {
            String::new()
        } else {
            format!(" ({})", beside.join(", "))
        };
        eprintln!("loadgen: result written to {}{beside}", p.display());
    }
    if let Some(e) = out.exporter.take() {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if !a.quiet && !e.linger().is_zero() {
            let until = std::time::SystemTime::now() + e.linger();
            eprintln!(
                "loadgen: metrics stay up at http://{}/ for {} (until {}); Ctrl-C ends it sooner",
                e.local_addr(),
                humantime::format_duration(e.linger()),
                humantime::format_rfc3339_seconds(until)
            );
        }
        rt.block_on(e.finish());
    }
    if a.strict && out.file.runs.iter().any(|r| !r.verdict.valid) {
        return Ok(Exit::NotValid);
    }
    // Leave without waiting for the embedded server's threads.
    Ok(out.exit)
}

fn cmd_prepare(a: PrepareArgs) -> Result<Exit, Error> {
    if a.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    let target = match &loadgen::proto::shards::ranges::group(&a.targets)[..] {
        [one] => one.clone(),
        _ => return Err("prepare takes one target at a time (several URLs are one target only as shards, each with ?keys=FROM-TO)".into()),
    };
    let rt = runtime()?;
    // Ctrl-C / SIGTERM ends a prepare at any step, a hung one included.
    let p = rt.block_on(async {
        let mut signals = loadgen::signals::StopSignals::install();
        tokio::select! {
            r = loadgen::prepare::prepare(&target, (1, a.rows), a.key_format.as_ref()) => r.map_err(|e| e.0),
            _ = signals.next() => Err(
                "stopped while preparing: the data set may be partly loaded; prepare again".into()
            ),
        }
    })?;
    println!(
        "loaded {} rows in {:.1}s ({} rows/s)",
        loadgen::report::text::thousands(p.rows),
        p.seconds,
        loadgen::report::text::thousands((p.rows as f64 / p.seconds.max(1e-9)) as u64)
    );
    match p.pruned {
        true => println!(
            "ids 1..{} hold the data set's rows and nothing outside them is left (rows a write run \
             inserted are gone): a write run starts from here; to reset after one, prepare again",
            a.rows
        ),
        false => println!(
            "ids 1..{} hold the data set's rows; keys of other ids were left as they are (a Redis \
             Cluster is not pruned)",
            a.rows
        ),
    }
    Ok(Exit::Clean)
}

// A bad or unreadable trace is bad input: one line naming the file and line.
fn cmd_trace_bench(a: TraceBenchArgs) -> Result<Exit, Error> {
    let r = loadgen::trace::bench::bench(&a.file).map_err(|e| e.to_string())?;
    println!("{}", r.render());
    Ok(Exit::Clean)
}

fn cmd_serve(a: ServeArgs) -> Result<Exit, Error> {
    use loadgen::serve::Bind;
    let bind =
        match &a.unix {
            Some(path) => Bind::Unix(path.clone()),
            None => Bind::Tcp(a.addr.parse().map_err(|_| {
                format!("bad --addr '{}': use IP:PORT like 127.0.0.1:8080", a.addr)
            })?),
        };
    if a.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    let threads = a.threads.unwrap_or_else(loadgen::plan::default_threads);
    let timing = loadgen::serve::Timing {
        delay: a.delay.unwrap_or_default(),
        cold: a.cold.unwrap_or_default(),
    };
    let server = loadgen::serve::start_delayed(&bind, (1, a.rows), threads, timing).map_err(
        |e| match &bind {
            Bind::Tcp(addr) => format!("cannot listen on {addr}: {e}"),
            Bind::Unix(path) => format!("cannot listen on socket {}: {e}", path.display()),
        },
    )?;
    eprintln!(
        "loadgen: serving {} rows on {} (Ctrl-C stops)",
        loadgen::report::text::thousands(server.rows),
        server.url()
    );
    let rt = runtime()?;
    rt.block_on(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    if let Bind::Unix(path) = &bind {
        let _ = std::fs::remove_file(path);
    }
    Ok(Exit::Clean)
}

fn metrics_config(a: &RunArgs) -> Result<Option<loadgen::metrics::MetricsConfig>, String> {
    let Some(addr) = &a.metrics else {
        if !a.run_label.is_empty() {
            return Err("--run-label needs --metrics ADDR".into());
        }
        return Ok(None);
    };
    let mut labels = Vec::new();
    for l in &a.run_label {
        // The key is checked with the other labels when the exporter starts (metrics.rs).
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| format!("bad --run-label '{l}': use KEY=VALUE"))?;
        labels.push((k.to_string(), v.to_string()));
    }
    Ok(Some(loadgen::metrics::MetricsConfig {
        addr: addr.clone(),
        linger: a.metrics_linger,
        labels,
        instance: a.instance.clone(),
        pages: loadgen::app::METRICS_PAGES,
    }))
}

fn cmd_merge(a: MergeArgs) -> Result<Exit, Error> {
    let merged = loadgen::merge::merge_files(&a.files, &loadgen::sink::stderr())?;
    let format = match a.format {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
    };
    let on_stdout = doc_on_stdout(a.output.as_deref());
    print_report(&merged, format, on_stdout);
    if let Some(p) = a.output.filter(|_| !on_stdout) {
        let json = serde_json::to_vec_pretty(&merged).expect("result serializes");
        let dest = loadgen::output::Dest::of(&p)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        dest.write(&json)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        // The HTML report beside a file of our own, as a run writes one (not beside a device).
        let mut beside = String::new();
        if dest.is_file() {
            let html_path = loadgen::output::beside(&p, "html");
            let html = loadgen::report::html::render(&merged);
            match loadgen::output::write(&html_path, html.as_bytes()) {
                Ok(()) => beside = format!(" (report: {})", html_path.display()),
                Err(e) => eprintln!("loadgen: cannot write {}: {e}", html_path.display()),
            }
        }
        eprintln!("loadgen: merged result written to {}{beside}", p.display());
    }
    Ok(Exit::Clean)
}

fn cmd_report(a: ReportArgs) -> Result<Exit, Error> {
    // Parsed by the model (older files it still accepts included) and redacted.
    let input = loadgen::merge::read_input(&a.file)?;
    let html = loadgen::report::html::render(&input.file);
    let out = a
        .output
        .unwrap_or_else(|| loadgen::output::beside(&a.file, "html"));
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", out.display());
    let dest = loadgen::output::Dest::of(&out).map_err(cannot)?;
    dest.write(html.as_bytes()).map_err(cannot)?;
    if !dest.is_stdout() {
        eprintln!("loadgen: report written to {}", out.display());
    }
    Ok(Exit::Clean)
}

/// `-o -` or `-o /dev/stdout`: the JSON document takes stdout (one parseable document).
fn doc_on_stdout(output: Option<&std::path::Path>) -> bool {
    output
        .and_then(|p| loadgen::output::Dest::of(p).ok())
        .is_some_and(|d| d.is_stdout())
}

/// The report on stdout; when the JSON document goes there, the text report moves to stderr.
fn print_report(file: &loadgen::result::ResultFile, format: Format, doc_on_stdout: bool) {
    let json = || serde_json::to_string_pretty(file).expect("result serializes") + "\n";
    match format {
        Format::Json => emit(&json()),
        Format::Text if doc_on_stdout => {
            eprint!("{}", loadgen::report::text::render(file));
            emit(&json());
        }
        Format::Text => emit(&loadgen::report::text::render(file)),
    }
}

/// Writes the report to stdout; a closed pipe (`loadgen run | head`) is not an error.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--help`'s first line names every protocol of the table.
    #[test]
    fn about_names_every_protocol() {
        let about = super::Cli::command()
            .get_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        for p in loadgen::proto::table::PROTOCOLS {
            assert!(about.contains(p.name), "{} missing from: {about}", p.name);
        }
    }
}
