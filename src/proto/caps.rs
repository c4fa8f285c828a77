//! What a driver can do, as data. Each driver row of the protocol table holds one [`Caps`],
//! its targets report it (`Target::caps`, adjusted for a set of servers), and [`refuse`] is
//! the one place that turns a flag the target cannot honour into its one-line refusal, so a
//! new target states what it does in its row instead of in the files that check flags.

use crate::error::SetupError;
use crate::mix::{Mix, Op};
use crate::plan::Plan;

/// How a server's own counter counts one multi-get of N keys, for its conservation check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Once per request (Redis `cmdstat_mget`, one SQL statement).
    Requests,
    /// Once per key (memcached `get_hits + get_misses`, HandlerSocket rows).
    Keys,
    /// Once per command a set splits it into (a Redis Cluster's MGET per hash slot).
    Commands,
}

/// How a protocol makes one target of several servers, where it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sets {
    None,
    /// Key ranges by `?keys=` (`proto::shards`).
    Shards,
    /// A client-side ketama pool (`memcache://h1:p1,h2:p2`).
    Pool,
    /// The server's own slot map (`redis://h:p?cluster=1`).
    Cluster,
}

/// What one driver can do; `PartialEq` so dispatch's test can check a built target against
/// its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Keys expire (`--ttl`).
    pub ttl: bool,
    /// Values live under named keys: `--key-format`, `--value-size`, and a trace's keys go out
    /// as written (else as ids, `trace::key_id`).
    pub named_keys: bool,
    /// The longest key the server takes, checked against a trace before its replay.
    pub max_key: Option<usize>,
    /// A multi-get (`--batch`, `mget:N`), and how the server counts it.
    pub multi_get: Option<Counted>,
    /// Requests one connection can have in flight (`-p`); 1 where it cannot pipeline.
    pub pipeline: usize,
    /// Writes grouped into transactions (`--txn`).
    pub txn: bool,
    /// The write ops it runs.
    pub writes: &'static [Op],
    pub sets: Sets,
}

/// Every write op.
pub const ALL_WRITES: &[Op] = &[Op::Update, Op::Insert, Op::Delete, Op::Upsert];

impl Caps {
    /// A driver that reads only: the start of a row.
    pub const READS: Caps = Caps {
        ttl: false,
        named_keys: false,
        max_key: None,
        multi_get: None,
        pipeline: 1,
        txn: false,
        writes: &[],
        sets: Sets::None,
    };

    /// The same driver as one member of a set: replies come from several servers and are
    /// taken in order, so one request in flight per connection.
    pub const fn in_set(self) -> Caps {
        Caps {
            pipeline: 1,
            ..self
        }
    }
}

/// Which targets the table says can do a thing, for a refusal's "X and Y have one".
pub type Who = fn(&dyn Fn(&Caps) -> bool) -> String;

/// Refuses, in one line, the first flag of `plan` that a target of `caps` cannot honour.
/// `kind` names the target (`memcache`), `set` says it is a set of servers (for `-p`),
/// `driver` the driver that runs it, and `who` lists the protocols that can.
pub fn refuse(
    caps: &Caps,
    plan: &Plan,
    kind: &str,
    set: bool,
    driver: Option<&str>,
    who: Who,
) -> Result<(), SetupError> {
    writes(caps, &plan.mix, kind)?;
    if plan.txn > 1 && !caps.txn {
        return Err(format!(
            "--txn {}: this {kind} target does not group writes into transactions; leave --txn out (every write is its own)",
            plan.txn
        )
        .into());
    }
    let n = plan.multi_get();
    if n > 0 && caps.multi_get.is_none() {
        return Err(format!(
            "{n} keys per request (--batch, mget:N): this {kind} target has no multi-get in loadgen yet; leave them out ({} have one)",
            who(&|c| c.multi_get.is_some())
        )
        .into());
    }
    if plan.ttl > 0 && !caps.ttl {
        return Err(format!(
            "--ttl {}: this {kind} target has no expiry; leave --ttl out ({} have one)",
            plan.ttl,
            who(&|c| c.ttl)
        )
        .into());
    }
    for (on, flag) in [
        (plan.value_size.is_some(), "--value-size"),
        (plan.key_format.is_some(), "--key-format"),
    ] {
        if on && !caps.named_keys {
            return Err(format!(
                "{flag}: this {kind} target stores rows by id, not values under named keys; leave {flag} out ({} take it)",
                who(&|c| c.named_keys)
            )
            .into());
        }
    }
    if let (Some(t), Some(max)) = (plan.trace.as_ref(), caps.max_key) {
        // A longer key would be refused by the server mid-replay: refused before it starts.
        let (line, len) = t.survey.longest_key;
        if len > max {
            return Err(format!(
                "{}:{line}: a key of {len} bytes: this {kind} target takes keys of at most {max} bytes; shorten the trace's keys or replay it on another target",
                t.path.display()
            )
            .into());
        }
    }
    if plan.pipeline > caps.pipeline {
        return Err(match (set, driver) {
            (true, _) => format!(
                "a {kind} set of servers takes one request in flight per connection; use -p 1 and more connections (-c)"
            ),
            (false, Some(d)) if d != "wire" => format!(
                "the {d} driver of this {kind} target cannot pipeline; use -p 1 and more connections (-c), or ?driver=wire"
            ),
            _ => format!(
                "this {kind} target cannot pipeline; use -p 1 and more connections (-c)"
            ),
        }
        .into());
    }
    Ok(())
}

/// The mix's first write op the target does not run, refused with the ops it does.
fn writes(caps: &Caps, mix: &Mix, kind: &str) -> Result<(), SetupError> {
    let Some(op) = mix.ops().find(|o| o.writes() && !caps.writes.contains(o)) else {
        return Ok(());
    };
    Err(match caps.writes {
        [] => format!(
            "--mix {}: this {kind} target cannot {} yet; use --mix read=100 (the default) here",
            mix.name(),
            op.name()
        ),
        ops => format!(
            "--mix {}: this {kind} target has no {}; use {}",
            mix.name(),
            op.name(),
            ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ")
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &dyn Fn(&Caps) -> bool) -> String {
        "others".into()
    }

    fn plan(f: impl FnOnce(&mut Plan)) -> Plan {
        let mut p = Plan::default();
        f(&mut p);
        p
    }

    fn refused(caps: &Caps, p: &Plan) -> String {
        refuse(caps, p, "t", false, None, none).unwrap_err().0
    }

    #[test]
    fn each_missing_capability_is_refused_by_its_flag() {
        let reads = Caps::READS;
        assert!(refuse(&reads, &Plan::default(), "t", false, None, none).is_ok());
        let p = plan(|p| p.ttl = 5);
        assert!(refused(&reads, &p).starts_with("--ttl 5: this t target has no expiry"));
        let p = plan(|p| p.txn = 4);
        assert!(refused(&reads, &p).starts_with("--txn 4:"));
        let p = plan(|p| p.batch = 8);
        assert!(refused(&reads, &p).starts_with("8 keys per request"));
        let p = plan(|p| p.pipeline = 2);
        assert!(refused(&reads, &p).contains("cannot pipeline"));
        let p = plan(|p| p.mix = Mix::parse("read=50,update=50").unwrap());
        assert!(refused(&reads, &p).contains("cannot update yet"));
        let some = Caps {
            writes: &[Op::Update, Op::Insert],
            ..reads
        };
        let p = plan(|p| p.mix = Mix::parse("read=50,upsert=50").unwrap());
        assert!(refused(&some, &p).ends_with("has no upsert; use update, insert"));
    }

    #[test]
    fn what_a_target_can_do_passes() {
        let all = Caps {
            ttl: true,
            named_keys: true,
            max_key: Some(250),
            multi_get: Some(Counted::Keys),
            pipeline: usize::MAX,
            txn: true,
            writes: ALL_WRITES,
            sets: Sets::Pool,
        };
        let p = plan(|p| {
            p.ttl = 5;
            p.txn = 4;
            p.batch = 8;
            p.pipeline = 16;
            p.mix = Mix::parse("read=50,update=10,insert=10,delete=10,upsert=20").unwrap();
        });
        assert!(refuse(&all, &p, "t", false, None, none).is_ok());
        let p = plan(|p| p.pipeline = 2);
        assert!(refuse(&all.in_set(), &p, "t", true, None, none)
            .unwrap_err()
            .0
            .contains("set of servers takes one request in flight"));
    }
}
