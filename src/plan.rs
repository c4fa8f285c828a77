//! Plan: the typed, validated settings of a run. No clap and no I/O here, so every rule is
//! unit-tested; the binary turns flags into a Plan and the engine trusts it.

use crate::error::ConfigError;
use std::time::Duration;

use crate::keys::Dist;
use crate::mix::{Mix, Op};
use crate::pacer::Arrival;
use crate::timeouts::Timeouts;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Statement prepared once per connection, executed with the key bound (pgbench -M prepared).
    Prepared,
    /// Query text with the key inlined, parsed by the server every time (pgbench -M simple).
    Simple,
}

/// When a run stops by itself (Ctrl-C stops any run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Measure for this long after the warm-up.
    Duration(Duration),
    /// Exactly this many counted requests, split over the connections.
    Requests(u64),
    /// `--trace`: until the trace's last request.
    Trace,
}

/// `--trace FILE`: the requests come from the file, at its pace times `speed`.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePlan {
    pub path: std::path::PathBuf,
    pub speed: f64,
    /// Lines, ops and span, read once before the run.
    pub survey: crate::trace::feed::Survey,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub connections: usize,
    pub pipeline: usize,
    pub threads: usize,
    pub stop: Stop,
    pub warmup: Duration,
    pub keys: (u64, u64),
    pub dist: Dist,
    pub query: Option<String>,
    pub mode: Mode,
    pub verify: bool,
    pub timeout: Duration,
    pub interval: Duration,
    pub seed: u64,
    pub rate: Option<f64>,
    pub arrival: Arrival,
    /// First and longest wait between reconnect attempts (capped exponential backoff).
    pub reconnect_backoff: (Duration, Duration),
    /// End the run early (exit 1) after this many errors.
    pub max_errors: Option<u64>,
    /// `--ci`: end the run once its CIs are this narrow (`-d` the longest it may run).
    pub ci: Option<crate::stats::Goal>,
    /// Which op each request is (`--mix`; default all reads).
    pub mix: Mix,
    /// The first insert key (`--insert-from`); None: the target's own (SQL: max(id) + 1), else
    /// above `keys`.
    pub insert_from: Option<u64>,
    /// `--instance`: names this generator's lane of insert keys, so concurrent ones never clash.
    pub instance: Option<String>,
    /// SQL targets: the user's statement per write op (`--query-update` ...).
    pub write_queries: Vec<(crate::mix::Op, String)>,
    /// `--txn`: writes per transaction on SQL targets; 1 is autocommit, one write each.
    pub txn: usize,
    /// `--batch`: keys per request (a multi-get); 1 is one key per request.
    pub batch: usize,
    /// `--reconnect-every N`: a connection is closed and opened again after every N requests.
    pub reconnect_every: Option<u64>,
    /// `--retries`: times a transaction (or write) that failed with a deadlock or
    /// serialization failure is sent again on its connection; 0: never.
    pub retries: u32,
    /// `--ttl`: seconds every write lives on memcached (exptime) and Redis (`EX`); 0: forever.
    pub ttl: u32,
    /// `--trace`: requests replayed from a file.
    pub trace: Option<TracePlan>,
    /// `--record-trace`: every request sent, written to this file in the trace format.
    pub record_trace: Option<std::path::PathBuf>,
    /// `--key-format`: how memcached and Redis keys name ids; None: the target's own.
    pub key_format: Option<crate::key_format::KeyFormat>,
    /// `--value-size`: bytes each write stores (memcached, Redis); None: the row as it is.
    pub value_size: Option<crate::value_size::ValueSize>,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            connections: 16,
            pipeline: 1,
            threads: default_threads(),
            stop: Stop::Duration(Duration::from_secs(10)),
            warmup: Duration::from_secs(1),
            keys: (1, 1_000_000),
            dist: Dist::Uniform,
            query: None,
            mode: Mode::Prepared,
            verify: false,
            timeout: Duration::from_secs(5),
            interval: Duration::from_secs(1),
            seed: 1,
            rate: None,
            arrival: Arrival::Uniform,
            reconnect_backoff: (Duration::from_millis(10), Duration::from_secs(1)),
            max_errors: None,
            ci: None,
            mix: Mix::default(),
            insert_from: None,
            instance: None,
            write_queries: Vec::new(),
            txn: 1,
            batch: 1,
            reconnect_every: None,
            retries: 0,
            ttl: 0,
            trace: None,
            record_trace: None,
            value_size: None,
            key_format: None,
        }
    }
}

pub use crate::mix::MAX_BATCH;

pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// One thread's share of a run: connections `first_conn..first_conn + conns`, and under
/// `Stop::Requests` each of them gets a quota so that the quotas sum to exactly n.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    pub thread: usize,
    pub first_conn: usize,
    pub conns: usize,
}

impl Plan {
    /// The statement of every write op of the mix, for a SQL target: the user's where given
    /// (`check`ed), else the target's `default`.
    pub fn write_statements(
        &self,
        default: impl Fn(crate::mix::Op) -> &'static str,
        check: impl Fn(crate::mix::Op, &str) -> Result<(), ConfigError>,
    ) -> Result<Vec<(crate::mix::Op, String)>, ConfigError> {
        let given = |op| self.write_queries.iter().find(|(o, _)| *o == op);
        self.mix
            .ops()
            .filter(|o| o.writes())
            .map(|op| match given(op) {
                Some((_, sql)) => check(op, sql).map(|()| (op, sql.clone())),
                None => Ok((op, default(op).to_string())),
            })
            .collect()
    }

    /// Checks the rules that no single flag parser can see. Err is the one-line message.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.connections == 0 {
            return Err(ConfigError("-c/--connections must be at least 1".into()));
        }
        if self.connections > 100_000 {
            return Err(ConfigError(
                "-c/--connections above 100000 is not supported".into(),
            ));
        }
        if self.pipeline == 0 || self.pipeline > 1024 {
            return Err(ConfigError(
                "-p/--pipeline must be between 1 and 1024".into(),
            ));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(ConfigError(
                "-t/--threads must be between 1 and 1024".into(),
            ));
        }
        if self.keys.0 > self.keys.1 {
            return Err(ConfigError(format!(
                "--keys {}-{}: the first key is above the last",
                self.keys.0, self.keys.1
            )));
        }
        match self.stop {
            Stop::Duration(d) if d.is_zero() => {
                return Err(ConfigError("-d/--duration must be above 0".into()))
            }
            Stop::Requests(0) => {
                return Err(ConfigError("-n/--requests must be at least 1".into()))
            }
            _ => {}
        }
        if self.ci.is_some() && (!matches!(self.stop, Stop::Duration(_)) || self.trace.is_some()) {
            return Err(ConfigError(
                "--ci runs until the CIs are narrow enough, with -d the longest it may run: leave out -n and --trace".into(),
            ));
        }
        if self.interval < Duration::from_millis(10) {
            return Err(ConfigError("--interval must be at least 10ms".into()));
        }
        if self.timeout < Duration::from_millis(1) {
            return Err(ConfigError("--timeout must be at least 1ms".into()));
        }
        if self.txn == 0 || self.txn > 10_000 {
            return Err(ConfigError(
                "--txn must be between 1 and 10000 writes per transaction".into(),
            ));
        }
        if self.txn > 1 && !self.mix.writes() {
            return Err(ConfigError(format!(
                "--txn {} groups writes, and --mix {} has none: add writes (e.g. --mix read=50,update=50) or leave --txn out",
                self.txn,
                self.mix.name()
            )));
        }
        if self.retries > 0 && !self.mix.writes() {
            return Err(ConfigError(format!(
                "--retries {} sends failed writes again, and --mix {} has none: add writes or leave --retries out",
                self.retries,
                self.mix.name()
            )));
        }
        if self.retries > 0 && self.pipeline > 1 {
            return Err(ConfigError(format!(
                "--retries {} needs one request in flight per connection, to send a failed transaction again in order: use -p 1 (more -c instead)",
                self.retries
            )));
        }
        if self.reconnect_every == Some(0) {
            return Err(ConfigError(
                "--reconnect-every must be 1 or more requests per connection".into(),
            ));
        }
        if self.reconnect_every.is_some() && self.txn > 1 {
            return Err(ConfigError(format!(
                "--reconnect-every closes connections while --txn {} keeps transactions open on them: use one or the other",
                self.txn
            )));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(ConfigError(format!(
                "--batch must be between 1 and {MAX_BATCH} keys per request"
            )));
        }
        // A trace's mix is its own ops, never typed: what clashes with a trace is said first.
        self.validate_trace()?;
        self.validate_multi_get()?;
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(ConfigError(
                    "-R/--rate must be a positive number of requests per second".into(),
                ));
            }
        }
        Ok(())
    }

    /// `--batch` and `mget:N`: what a multi-get cannot combine with.
    fn validate_multi_get(&self) -> Result<(), ConfigError> {
        if self.batch > 1 && self.mix.has(Op::Mget) {
            return Err(ConfigError(format!(
                "--batch {} and --mix {} both make multi-gets: use mget:N in --mix, or --batch with --mix read=100",
                self.batch,
                self.mix.name()
            )));
        }
        if self.batch > 1 && !self.mix.read_only() {
            return Err(ConfigError(format!(
                "--batch {} reads several keys per request, and --mix {} writes: use --mix read=100 (the default) with --batch, or mget:{} in the mix",
                self.batch,
                self.mix.name(),
                self.batch
            )));
        }
        if self.mix.has(Op::Mget) && (self.txn > 1 || self.retries > 0) {
            return Err(ConfigError(format!(
                "--mix {} has multi-gets, which --txn and --retries do not group or send again: leave mget:N out of the mix, or --txn and --retries",
                self.mix.name()
            )));
        }
        // A multi-get's rows are checked against the loaded data, which writes change.
        if self.verify && self.mix.has(Op::Mget) && self.mix.writes() {
            return Err(ConfigError(format!(
                "--verify checks a multi-get's rows against the loaded data, and --mix {} changes them: leave --verify out, or the writes",
                self.mix.name()
            )));
        }
        Ok(())
    }

    /// What a replay cannot combine with: settings that draw requests from a formula; and a
    /// recording, one key per line, cannot hold multi-gets.
    fn validate_trace(&self) -> Result<(), ConfigError> {
        if self.record_trace.is_some() && self.multi_get() > 0 {
            return Err(ConfigError(
                "--record-trace writes one key per request, and --batch or mget:N sends several: leave one out".into(),
            ));
        }
        let Some(t) = &self.trace else {
            return Ok(());
        };
        if !(t.speed.is_finite() && t.speed > 0.0) {
            return Err(ConfigError(
                "--speed must be a positive number (2 replays twice as fast)".into(),
            ));
        }
        let clash = [
            (self.batch > 1, "--batch"),
            (self.verify, "--verify"),
            (self.txn > 1, "--txn"),
            (matches!(self.stop, Stop::Requests(_)), "-n/--requests"),
            (self.ttl > 0, "--ttl"),
            (self.value_size.is_some(), "--value-size"),
        ];
        if let Some((_, flag)) = clash.iter().find(|(on, _)| *on) {
            return Err(ConfigError(format!(
                "--trace replays the file's own requests, which {flag} would change: leave {flag} out (-d cuts a replay short)"
            )));
        }
        Ok(())
    }

    /// Requests have due times: `-R`, or a trace whose lines carry timestamps. Their send
    /// lag (sent minus due) is then measured and judged.
    pub fn scheduled(&self) -> bool {
        self.rate.is_some() || self.trace_paced()
    }

    /// A timed trace sets the pace (no `-R`): the rate is the trace's, which may change on
    /// purpose, so rules for a steady rate do not apply.
    pub fn trace_paced(&self) -> bool {
        self.rate.is_none() && self.trace.as_ref().is_some_and(|t| t.survey.timed)
    }

    /// Keys per multi-get request: `--batch N` (every request), or `mget:N` in `--mix` (those
    /// requests); 0 when no request reads several keys.
    pub fn multi_get(&self) -> usize {
        match self.batch {
            n if n > 1 => n,
            _ => self.mix.mget_keys(),
        }
    }

    /// Connections per thread: never more threads than connections, and spread evenly.
    pub fn split(&self) -> Vec<Share> {
        let threads = self.threads.min(self.connections);
        let (base, extra) = (self.connections / threads, self.connections % threads);
        let mut first = 0;
        (0..threads)
            .map(|t| {
                let conns = base + usize::from(t < extra);
                let s = Share {
                    thread: t,
                    first_conn: first,
                    conns,
                };
                first += conns;
                s
            })
            .collect()
    }

    /// Counted requests for connection `conn` under `Stop::Requests(n)`; the quotas sum to n.
    pub fn quota(&self, conn: usize) -> Option<u64> {
        match self.stop {
            Stop::Requests(n) => {
                let c = self.connections as u64;
                Some(n / c + u64::from((conn as u64) < n % c))
            }
            Stop::Duration(_) | Stop::Trace => None,
        }
    }

    /// Every time bound of the run, from `--timeout`.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts::new(self.timeout)
    }
}

/// `30s`, `500ms`, `2m`, `1h`, `250us`, `1.5ms`, `1m30s` (humantime's units), or a bare number
/// of seconds (`1.5`), at most 10^9 s.
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let bad = || {
        format!(
            "bad duration '{s}': use a number of seconds (10, 1.5) or a number with a unit (30s, 500ms, 2m, 250us)"
        )
    };
    let t = s.trim();
    let d = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        Duration::try_from_secs_f64(t.parse().map_err(|_| bad())?).map_err(|_| bad())?
    } else {
        humantime::parse_duration(t).map_err(|_| bad())?
    };
    if d > Duration::from_secs(1_000_000_000) {
        return Err(bad().into());
    }
    Ok(d)
}

/// `A-B` (inclusive), both non-negative integers with A <= B; `N` alone means 1-N.
pub fn parse_key_range(s: &str) -> Result<(u64, u64), ConfigError> {
    let bad = || {
        ConfigError(format!(
            "bad key range '{s}': use FIRST-LAST with FIRST <= LAST, like 1-1000000"
        ))
    };
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (
            a.trim().parse::<u64>().map_err(|_| bad())?,
            b.trim().parse::<u64>().map_err(|_| bad())?,
        ),
        None => (1, s.trim().parse::<u64>().map_err(|_| bad())?),
    };
    if b > i64::MAX as u64 {
        return Err(ConfigError(format!(
            "bad key range '{s}': LAST is at most {} (i64::MAX, the widest key SQL columns hold)",
            i64::MAX
        )));
    }
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// A count with an optional k/M suffix: `20000`, `20k`, `1M`.
pub fn parse_count(s: &str) -> Result<u64, ConfigError> {
    let bad = || {
        format!("bad count '{s}': use a whole number, optionally with k or M, like 20000 or 20k")
    };
    let t = s.trim().replace('_', "");
    let (num, mul) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1_000),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1_000_000),
        _ => (&t[..], 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mul))
        .ok_or_else(|| bad().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_every_takes_1_or_more_and_no_transactions() {
        let with = |every, txn| Plan {
            reconnect_every: Some(every),
            txn,
            ..Plan::default()
        };
        assert!(with(1, 1).validate().is_ok());
        let e = with(0, 1).validate().unwrap_err().0;
        assert!(e.starts_with("--reconnect-every must be 1 or more"), "{e}");
        let e = with(10, 2).validate().unwrap_err().0;
        assert!(e.contains("--txn 2"), "{e}");
    }

    #[test]
    fn batch_takes_1_to_1000_keys_and_reads_only() {
        let with = |batch, mix: &str| Plan {
            batch,
            mix: Mix::parse(mix).unwrap(),
            ..Plan::default()
        };
        assert!(with(1, "read=1").validate().is_ok());
        assert!(with(MAX_BATCH, "read=1").validate().is_ok());
        for bad in [0, MAX_BATCH + 1] {
            let e = with(bad, "read=1").validate().unwrap_err().0;
            assert!(e.starts_with("--batch must be between 1 and 1000"), "{e}");
        }
        let e = with(10, "read=9,update=1").validate().unwrap_err().0;
        assert!(e.contains("--mix read=9,update=1 writes"), "{e}");
        assert!(with(1, "read=9,update=1").validate().is_ok());
        let e = with(10, "read=9,mget:5=1").validate().unwrap_err().0;
        assert!(e.contains("both make multi-gets"), "{e}");
        assert_eq!(with(1, "read=9,mget:5=1").multi_get(), 5);
        assert_eq!(with(7, "read=1").multi_get(), 7);
        assert_eq!(with(1, "read=1").multi_get(), 0);
        assert!(with(1, "mget:5=1,update=1").validate().is_ok());
        let verify = Plan {
            verify: true,
            ..with(1, "mget:5=1,update=1")
        };
        let e = verify.validate().unwrap_err().0;
        assert!(e.starts_with("--verify checks a multi-get"), "{e}");
        let retry = Plan {
            retries: 1,
            ..with(1, "read=1,mget:5=1")
        };
        let e = retry.validate().unwrap_err().0;
        assert!(e.contains("has none"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration(" 1h ").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        for bad in [
            "", "s", "10x", "-1s", "1e9999", "ten", "1.2.3", ".", "100y", "1e3",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // One rule, said in the error too: a bare number is seconds.
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        let e = parse_duration("5x").unwrap_err().0;
        assert!(e.contains("a number of seconds (10, 1.5)"), "{e}");
    }

    #[test]
    fn key_ranges() {
        assert_eq!(parse_key_range("1-1000000").unwrap(), (1, 1_000_000));
        assert_eq!(parse_key_range("500").unwrap(), (1, 500));
        let e = parse_key_range("1-18446744073709551615").unwrap_err();
        assert!(e.contains("at most 9223372036854775807"), "{e}");
        assert!(!e.contains("FIRST <= LAST"), "{e}");
        for bad in ["5-1", "a-b", "1-", "-", "1-2-3", "-5"] {
            assert!(parse_key_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("20k").unwrap(), 20_000);
        assert_eq!(parse_count("1M").unwrap(), 1_000_000);
        assert_eq!(parse_count("1_000").unwrap(), 1_000);
        assert!(parse_count("1.5k").is_err());
        assert!(parse_count("x").is_err());
    }

    #[test]
    fn split_spreads_connections_and_caps_threads() {
        let p = Plan {
            connections: 5,
            threads: 2,
            ..Plan::default()
        };
        let s = p.split();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].first_conn, s[0].conns), (0, 3));
        assert_eq!((s[1].first_conn, s[1].conns), (3, 2));
        let p = Plan {
            connections: 1,
            threads: 8,
            ..Plan::default()
        };
        assert_eq!(p.split().len(), 1);
    }

    #[test]
    fn quotas_sum_to_exactly_n() {
        for (n, c) in [(20_000u64, 16usize), (7, 3), (2, 5), (1_000_001, 64)] {
            let p = Plan {
                connections: c,
                stop: Stop::Requests(n),
                ..Plan::default()
            };
            let total: u64 = (0..c).map(|i| p.quota(i).unwrap()).sum();
            assert_eq!(total, n);
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let bad = [
            (
                Plan {
                    connections: 0,
                    ..Plan::default()
                },
                "--connections",
            ),
            (
                Plan {
                    pipeline: 0,
                    ..Plan::default()
                },
                "--pipeline",
            ),
            (
                Plan {
                    threads: 0,
                    ..Plan::default()
                },
                "--threads",
            ),
            (
                Plan {
                    keys: (5, 1),
                    ..Plan::default()
                },
                "--keys",
            ),
            (
                Plan {
                    stop: Stop::Requests(0),
                    ..Plan::default()
                },
                "--requests",
            ),
            (
                Plan {
                    stop: Stop::Duration(Duration::ZERO),
                    ..Plan::default()
                },
                "--duration",
            ),
            (
                Plan {
                    rate: Some(-1.0),
                    ..Plan::default()
                },
                "--rate",
            ),
            (
                Plan {
                    interval: Duration::from_millis(1),
                    ..Plan::default()
                },
                "--interval",
            ),
            (
                Plan {
                    txn: 0,
                    ..Plan::default()
                },
                "--txn",
            ),
            (
                // Nothing to group: the default mix only reads.
                Plan {
                    txn: 2,
                    ..Plan::default()
                },
                "has none",
            ),
        ];
        for (p, flag) in bad {
            let e = p.validate().unwrap_err();
            assert!(e.contains(flag), "{e}");
        }
        assert!(Plan::default().validate().is_ok());
        let writes = Plan {
            txn: 5,
            mix: Mix::parse("read=50,update=50").unwrap(),
            ..Plan::default()
        };
        assert!(writes.validate().is_ok());
        let retries = |retries, pipeline, mix| Plan {
            retries,
            pipeline,
            mix: Mix::parse(mix).unwrap(),
            ..Plan::default()
        };
        assert!(retries(3, 1, "update=100").validate().is_ok());
        let e = retries(3, 8, "update=100").validate().unwrap_err();
        assert!(e.contains("--retries 3") && e.contains("-p 1"), "{e}");
        let e = retries(3, 1, "read=100").validate().unwrap_err();
        assert!(e.contains("--retries 3") && e.contains("has none"), "{e}");
    }
}
