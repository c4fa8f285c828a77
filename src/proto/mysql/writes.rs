//! MySQL / MariaDB writes (`--mix`): one prepared statement per write op, executed with its
//! parameters bound in the binary protocol (both drivers), and the server's own count of each.
//! MySQL placeholders are positional, so each op's parameters come in the order of its `?`s:
//! update (user_name, key), insert and upsert (key, user_name, user_email, created), delete
//! (key). The values are the data set's row of (key, version) (`dataset`). What needs a
//! connection of its own (counts, max(user_id), settings) runs through `MyOpts`.

use crate::dataset;
use crate::error::{ConfigError, SetupError};
use crate::mix::Op;
use crate::plan::Plan;
use crate::proto::target::ServerCount;

const UPDATE: &str = "UPDATE usr SET user_name = ? WHERE user_id = ?";
const INSERT: &str =
    "INSERT INTO usr (user_id, user_name, user_email, created) VALUES (?, ?, ?, ?)";
const DELETE: &str = "DELETE FROM usr WHERE user_id = ?";
const UPSERT: &str =
    "INSERT INTO usr (user_id, user_name, user_email, created) VALUES (?, ?, ?, ?) \
ON DUPLICATE KEY UPDATE user_name = VALUES(user_name)";

/// One parameter of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    Key,
    Name,
    Email,
    Created,
}

/// The parameters of `op`'s statement, in the order of its `?`s.
pub fn params(op: Op) -> &'static [Param] {
    use Param::*;
    match op {
        Op::Update => &[Name, Key],
        Op::Insert | Op::Upsert => &[Key, Name, Email, Created],
        Op::Delete | Op::Read | Op::Mget => &[Key],
    }
}

/// The statement of a write op: the default, or the user's (`--query-update` ...).
pub fn default_sql(op: Op) -> &'static str {
    match op {
        Op::Update => UPDATE,
        Op::Insert => INSERT,
        Op::Delete => DELETE,
        Op::Upsert | Op::Read | Op::Mget => UPSERT,
    }
}

/// The statement of every write op of the plan's mix: the user's where given (checked), else
/// the default.
pub fn statements(plan: &Plan) -> Result<Vec<(Op, String)>, SetupError> {
    Ok(plan.write_statements(default_sql, check)?)
}

/// A user's statement for `op` has one `?` per parameter, as `--query` has one for the key.
/// The server's count of parameters is checked again when each connection prepares it.
pub fn check(op: Op, sql: &str) -> Result<(), ConfigError> {
    let n = sql.matches('?').count();
    let want = params(op).len();
    if n != want {
        return Err(ConfigError(format!(
            "--query-{} for MySQL needs exactly {want} ?, in this order: {} (it has {n})",
            op.name(),
            describe(op)
        )));
    }
    Ok(())
}

/// The parameters of `op`, in words.
pub fn describe(op: Op) -> &'static str {
    match op {
        Op::Update => "user_name, the key",
        Op::Delete | Op::Read | Op::Mget => "the key",
        Op::Insert | Op::Upsert => "the key, user_name, user_email, created",
    }
}

/// Appends the parameters of the write `op` of (key, version) to a COM_STMT_EXECUTE whose
/// head (statement, flags, iteration count) is written: the key as an unsigned LONGLONG, the
/// rest as strings the server converts to the columns' types. Allocates nothing beyond
/// growing `out`.
pub fn bind(op: Op, key: u64, version: u64, out: &mut Vec<u8>) {
    let ps = params(op);
    out.push(0); // NULL bitmap: at most 4 parameters, none NULL
    out.push(1); // types follow
    for p in ps {
        out.extend_from_slice(match p {
            Param::Key => &[0x08, 0x80], // LONGLONG, unsigned
            _ => &[0xfd, 0x00],          // VAR_STRING
        });
    }
    for p in ps {
        match p {
            Param::Key => out.extend_from_slice(&key.to_le_bytes()),
            Param::Name => string(out, |o| dataset::write_name(o, key, version)),
            Param::Email => string(out, |o| dataset::write_email(o, key)),
            Param::Created => string(out, |o| dataset::write_created(o, key)),
        }
    }
}

/// A length-encoded string of what `write` appends (always under 251 bytes: a one-byte length).
fn string(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.push(0);
    write(out);
    out[at] = (out.len() - at - 1) as u8;
}

/// The status counter the server moves once for every execution of `sql`, by its first word.
/// `Com_<type>` and not `Handler_update/write/delete`: MariaDB moves `Com_<type>` (beside
/// Com_stmt_execute) on every execute of a prepared statement, hit, miss or error alike, as
/// loadgen counts requests; the Handler_* count rows changed, so an update or delete that finds
/// no row (a miss), or an update that writes the value the row has, moves none. Com_insert
/// is every INSERT, upserts (ON DUPLICATE KEY UPDATE) included.
pub fn counter(sql: &str) -> Option<&'static str> {
    let first = sql.split_whitespace().next()?;
    ["UPDATE", "INSERT", "DELETE", "REPLACE"]
        .into_iter()
        .zip(["Com_update", "Com_insert", "Com_delete", "Com_replace"])
        .find(|(w, _)| first.eq_ignore_ascii_case(w))
        .map(|(_, c)| c)
}

/// The status counters to read for a run whose writes are `statements`: `total` (every
/// request: Com_stmt_execute), `reads` where reads have a counter of their own (Com_select in
/// `--mode simple`, writes then are the executes), and each write statement's `Com_<type>`.
pub fn counter_names<'a>(
    total: &'a str,
    reads: Option<&'a str>,
    statements: &[(Op, String)],
) -> Vec<&'a str> {
    let mut names = vec![total];
    names.extend(reads);
    for (_, sql) in statements {
        if let Some(c) = counter(sql).filter(|c| !names.contains(c)) {
            names.push(c);
        }
    }
    names
}

/// The server's count, total and per op (`Op::index` order), from the `values` of the
/// counters `counter_names` gave. An op whose counter another op of the mix moves too (insert
/// and upsert: Com_insert) has no count of its own.
pub fn server_count(
    names: &[&str],
    values: &[u64],
    reads: Option<&str>,
    statements: &[(Op, String)],
) -> ServerCount {
    let value_of = |name: &str| values[names.iter().position(|n| *n == name).expect("read")];
    let total = values[0];
    let written: u64 = names[1 + reads.is_some() as usize..]
        .iter()
        .map(|c| value_of(c))
        .sum();
    let mut ops = vec![ServerCount::UNCOUNTED; Op::COUNT];
    for (op, sql) in statements {
        let c = counter(sql);
        let shared = statements.iter().filter(|(_, s)| counter(s) == c).count() > 1;
        if let Some(c) = c.filter(|_| !shared) {
            ops[op.index()] = value_of(c);
        }
    }
    let every_write_counted = statements.iter().all(|(_, s)| counter(s).is_some());
    let (value, read) = match reads {
        Some(r) => (value_of(r) + total, value_of(r)),
        // Com_<type> also counts text-protocol statements of other clients since the server
        // started, so the difference may be below 0: it is lifted, and only deltas are read.
        None if every_write_counted => (total, (1 << 62) + total - written),
        None => (total, ServerCount::UNCOUNTED),
    };
    ops[Op::Read.index()] = read;
    ServerCount {
        epoch: None,
        value,
        source: format!("global status {}", names.join(", ")),
        ops,
        members: Vec::new(),
        per_request: 1,
        redirects: None,
        parts: None,
    }
}

/// The statement that finds where inserts start: above the table's highest user_id. None for
/// the user's own insert (its table is not known here).
pub fn next_id_sql(statements: &[(Op, String)]) -> Option<&'static str> {
    let own = |(op, sql): &(Op, String)| *op == Op::Insert && sql != default_sql(*op);
    (!statements.iter().any(own))
        .then_some("SELECT CAST(COALESCE(MAX(user_id), 0) + 1 AS UNSIGNED) FROM usr")
}

/// The server settings that decide what a write costs.
pub const DURABILITY: [&str; 2] = ["innodb_flush_log_at_trx_commit", "sync_binlog"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Mix;

    #[test]
    fn writes_bind_the_row_of_key_and_version() {
        let mut out = b"x".to_vec();
        bind(Op::Update, 42, 7, &mut out);
        let mut want = b"x".to_vec();
        want.extend_from_slice(&[0, 1, 0xfd, 0, 0x08, 0x80, 8]);
        want.extend_from_slice(b"user42v7");
        want.extend_from_slice(&42u64.to_le_bytes());
        assert_eq!(out, want);

        let mut out = Vec::new();
        bind(Op::Insert, 5, 1, &mut out);
        assert_eq!(&out[..8], &[0, 1, 0x08, 0x80, 0xfd, 0, 0xfd, 0]);
        let s = String::from_utf8_lossy(&out);
        assert!(s.contains("\x07user5v1\x11user5@example.com\x132010-02-03 11:22:38"));

        let mut out = Vec::new();
        bind(Op::Delete, 5, 3, &mut out);
        assert_eq!(out, [&[0, 1, 0x08, 0x80][..], &5u64.to_le_bytes()].concat());
    }

    #[test]
    fn user_statements_need_one_placeholder_per_parameter() {
        for op in [Op::Update, Op::Insert, Op::Delete, Op::Upsert] {
            assert!(check(op, default_sql(op)).is_ok(), "{op:?}");
        }
        let e = check(Op::Update, "UPDATE t SET a = 1 WHERE id = ?").unwrap_err();
        assert!(
            e.contains("--query-update for MySQL needs exactly 2 ?, in this order: user_name, the key (it has 1)"),
            "{e}"
        );
        assert!(check(Op::Delete, "DELETE FROM t WHERE id = ? AND a = ?").is_err());
        let given = [(Op::Delete, "DELETE FROM t WHERE k = ?".to_string())];
        let plan = Plan {
            mix: Mix::parse("read=1,delete=1,update=1").unwrap(),
            write_queries: given.to_vec(),
            ..Plan::default()
        };
        let s = statements(&plan).unwrap();
        assert_eq!(
            s,
            [
                (Op::Update, UPDATE.to_string()),
                (Op::Delete, given[0].1.clone())
            ]
        );
    }

    #[test]
    fn counters_by_statement_type() {
        assert_eq!(counter(UPDATE), Some("Com_update"));
        assert_eq!(counter(UPSERT), Some("Com_insert"));
        assert_eq!(counter(" delete from t where k = ?"), Some("Com_delete"));
        assert_eq!(counter("REPLACE INTO t VALUES (?)"), Some("Com_replace"));
        assert_eq!(counter("CALL p(?)"), None);
    }

    #[test]
    fn reads_are_the_executes_no_write_counter_took() {
        let plan = Plan {
            mix: Mix::parse("read=1,update=1,insert=1,upsert=1").unwrap(),
            ..Plan::default()
        };
        let st = statements(&plan).unwrap();
        let names = counter_names("Com_stmt_execute", None, &st);
        assert_eq!(names, ["Com_stmt_execute", "Com_update", "Com_insert"]);
        let before = server_count(&names, &[100, 30, 50], None, &st);
        let after = server_count(&names, &[200, 60, 60], None, &st);
        let delta = |op: Op| after.ops[op.index()].wrapping_sub(before.ops[op.index()]);
        assert_eq!((delta(Op::Read), delta(Op::Update)), (60, 30));
        assert_eq!(after.ops[Op::Insert.index()], ServerCount::UNCOUNTED);
        assert_eq!(after.ops[Op::Upsert.index()], ServerCount::UNCOUNTED);
        assert_eq!(after.value - before.value, 100);
        // --mode simple: reads are Com_select, every execute a write.
        let names = counter_names("Com_stmt_execute", Some("Com_select"), &st);
        let c = server_count(&names, &[7, 5, 3, 4], Some("Com_select"), &st);
        assert_eq!((c.value, c.ops[Op::Read.index()]), (12, 5));
    }
}
