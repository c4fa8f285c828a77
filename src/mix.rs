//! The op mix (`--mix read=90,update=10`): which operation each request is, and where inserts
//! take their keys. Reads are the default; a read-only mix draws no random number per request.
//! `mget:N` is a read of N keys in one request (the target's multi-get, as `--batch N`).

use crate::error::ConfigError;
use crate::keys::Rng;

/// One operation of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Update,
    Insert,
    Delete,
    Upsert,
    /// A multi-get of `Mix::mget_keys` keys.
    Mget,
}

impl Op {
    pub const COUNT: usize = 6;
    pub const ALL: [Op; Op::COUNT] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Delete,
        Op::Upsert,
        Op::Mget,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Delete => "delete",
            Op::Upsert => "upsert",
            Op::Mget => "mget",
        }
    }

    pub fn writes(self) -> bool {
        !matches!(self, Op::Read | Op::Mget)
    }
}

/// Weights per op (`Op::index` order); their sum is above 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix {
    weights: [u32; Op::COUNT],
    total: u64,
    /// Keys per `mget` request (0 when the mix has none).
    mget: usize,
}

/// Most keys one multi-get request may read (`--batch`, `mget:N`).
pub const MAX_BATCH: usize = 1000;

impl Default for Mix {
    fn default() -> Self {
        Mix::only(Op::Read)
    }
}

impl Mix {
    pub fn only(op: Op) -> Mix {
        let mut weights = [0; Op::COUNT];
        weights[op.index()] = 1;
        Mix {
            weights,
            total: 1,
            mget: 0,
        }
    }

    /// The ops a trace holds, weighted by their counts (`trace::feed::Survey::ops`).
    pub fn of_counts(counts: &[u64; Op::COUNT]) -> Mix {
        let top = counts.iter().copied().max().unwrap_or(0).max(1);
        // Scaled into u32 weights; an op the trace holds keeps a weight of at least 1.
        let weights = counts.map(|c| match c {
            0 => 0,
            c => ((c as u128 * 1_000_000 / top as u128) as u32).max(1),
        });
        let total = weights.iter().map(|&w| u64::from(w)).sum();
        match total {
            0 => Mix::default(),
            _ => Mix {
                weights,
                total,
                mget: 0,
            },
        }
    }

    /// `read=90,update=10`: op=weight pairs, any subset, each op at most once; `mget:10=20`
    /// is a multi-get of 10 keys.
    pub fn parse(s: &str) -> Result<Mix, ConfigError> {
        let bad = |why: &str| {
            format!("bad --mix '{s}': {why}; use op=weight pairs like read=90,update=10 (ops: read, update, insert, delete, upsert, mget:N for N keys per request)")
        };
        let mut weights = [0u32; Op::COUNT];
        let mut seen = [false; Op::COUNT];
        let mut mget = 0;
        for part in s.split(',') {
            let (name, w) = part
                .split_once('=')
                .ok_or_else(|| bad(&format!("'{}' has no =weight", part.trim())))?;
            let name = match name.trim().split_once(':') {
                Some(("mget", n)) => {
                    mget = n
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_BATCH).contains(n))
                        .ok_or_else(|| {
                            bad(&format!(
                                "mget:{n} needs a number of keys from 1 to {MAX_BATCH}"
                            ))
                        })?;
                    "mget"
                }
                _ if name.trim() == "mget" => {
                    return Err(bad("mget needs its keys per request, as mget:10").into())
                }
                _ => name.trim(),
            };
            let op = Op::ALL
                .into_iter()
                .find(|o| o.name() == name)
                .ok_or_else(|| bad(&format!("unknown op '{name}'")))?;
            let w: u32 = w
                .trim()
                .parse()
                .ok()
                .filter(|w| *w <= 1_000_000)
                .ok_or_else(|| {
                    bad(&format!(
                        "weight '{}' is not a whole number up to 1000000",
                        w.trim()
                    ))
                })?;
            if std::mem::replace(&mut seen[op.index()], true) {
                return Err(bad(&format!("'{}' is given twice", op.name())).into());
            }
            weights[op.index()] = w;
        }
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        if total == 0 {
            return Err(bad("every weight is 0").into());
        }
        if weights[Op::Mget.index()] == 0 {
            mget = 0;
        }
        Ok(Mix {
            weights,
            total,
            mget,
        })
    }

    /// Keys per `mget:N` request; 0 when the mix has none.
    pub fn mget_keys(&self) -> usize {
        self.mget
    }

    /// Only reads: results and metrics keep their read-only shape.
    pub fn read_only(&self) -> bool {
        self.weights[Op::Read.index()] as u64 == self.total
    }

    /// Some op writes (a multi-get does not).
    pub fn writes(&self) -> bool {
        self.ops().any(Op::writes)
    }

    /// The ops with a weight, in `Op::ALL` order.
    pub fn ops(&self) -> impl Iterator<Item = Op> + '_ {
        Op::ALL.into_iter().filter(|o| self.weights[o.index()] > 0)
    }

    pub fn has(&self, op: Op) -> bool {
        self.weights[op.index()] > 0
    }

    /// `read=90,update=10`, as parsed (ops without weight left out).
    pub fn name(&self) -> String {
        let parts: Vec<String> = self
            .ops()
            .map(|o| match o {
                Op::Mget => format!("mget:{}={}", self.mget, self.weights[o.index()]),
                _ => format!("{}={}", o.name(), self.weights[o.index()]),
            })
            .collect();
        parts.join(",")
    }

    /// The op of the next request.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> Op {
        let mut r = rng.below(self.total);
        for op in Op::ALL {
            let w = u64::from(self.weights[op.index()]);
            if r < w {
                return op;
            }
            r -= w;
        }
        Op::Read
    }
}

/// Where inserts take their keys: from `first` up, in `lanes` interleaved lanes of which this
/// generator takes `lane` (one lane per `--instance` name), and within that lane connection i of
/// n takes the i-th, (i+n)-th, ... key, so no two connections or named instances insert the same
/// key, and a re-run that starts above the last run's keys (`first`) continues without a clash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsertSeq {
    pub first: u64,
    pub lane: u64,
    pub lanes: u64,
}

/// Lanes when generators are named with `--instance`: two names clash with odds 1 in this.
pub const INSTANCE_LANES: u64 = 1024;

impl InsertSeq {
    /// The lane of an `--instance` name (FNV-1a), or the one lane of an unnamed generator.
    pub fn for_instance(first: u64, instance: Option<&str>) -> InsertSeq {
        match instance {
            None => InsertSeq {
                first,
                lane: 0,
                lanes: 1,
            },
            Some(name) => {
                let mut h: u64 = 0xCBF2_9CE4_8422_2325;
                for b in name.bytes() {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0000_0100_0000_01B3);
                }
                InsertSeq {
                    first,
                    lane: h % INSTANCE_LANES,
                    lanes: INSTANCE_LANES,
                }
            }
        }
    }

    /// The `k`-th insert key of connection `conn` of `conns`.
    #[inline]
    pub fn key(&self, conn: u64, conns: u64, k: u64) -> u64 {
        let slot = conn + k * conns;
        self.first + self.lane + slot * self.lanes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_weights_and_refuses_bad_mixes() {
        let m = Mix::parse("read=90,update=10").unwrap();
        assert!(!m.read_only());
        assert_eq!(m.name(), "read=90,update=10");
        assert!(Mix::parse("read=100").unwrap().read_only());
        assert!(Mix::default().read_only());
        assert_eq!(
            Mix::parse(" insert = 3 , delete=1")
                .unwrap()
                .ops()
                .collect::<Vec<_>>(),
            vec![Op::Insert, Op::Delete]
        );
        for (bad, why) in [
            ("read", "no =weight"),
            ("select=1", "unknown op 'select'"),
            ("read=x", "weight 'x'"),
            ("read=-1", "weight '-1'"),
            ("read=1,read=2", "given twice"),
            ("read=0,update=0", "every weight is 0"),
            ("", "no =weight"),
            ("mget=1", "mget:10"),
            ("mget:0=1", "from 1 to 1000"),
            ("mget:1001=1", "from 1 to 1000"),
            ("mget:x=1", "from 1 to 1000"),
            ("get:3=1", "unknown op 'get:3'"),
        ] {
            let e = Mix::parse(bad).unwrap_err();
            assert!(e.contains(why) && e.starts_with("bad --mix"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_mget_op_carries_its_keys_per_request() {
        let m = Mix::parse("read=50, mget:10=50").unwrap();
        assert_eq!((m.mget_keys(), m.name()), (10, "read=50,mget:10=50".into()));
        assert!(!m.read_only() && m.has(Op::Mget) && !Op::Mget.writes());
        assert_eq!(Mix::parse(&m.name()).unwrap(), m);
        assert_eq!(Mix::parse("read=1,mget:5=0").unwrap().mget_keys(), 0);
    }

    #[test]
    fn picks_in_proportion() {
        let m = Mix::parse("read=50,update=30,insert=10,delete=10").unwrap();
        let mut rng = Rng::new(3);
        let mut n = [0u64; Op::COUNT];
        for _ in 0..100_000 {
            n[m.pick(&mut rng).index()] += 1;
        }
        for (op, want) in [
            (Op::Read, 50_000),
            (Op::Update, 30_000),
            (Op::Insert, 10_000),
        ] {
            let got = n[op.index()] as i64;
            assert!((got - want).abs() < 1_000, "{op:?} {got}");
        }
        assert_eq!(n[Op::Upsert.index()], 0);
    }

    #[test]
    fn insert_keys_never_clash_between_connections_or_instances() {
        let mut seen = std::collections::HashSet::new();
        for name in ["a", "b"] {
            let s = InsertSeq::for_instance(1_000_001, Some(name));
            for conn in 0..4 {
                for k in 0..1000 {
                    let key = s.key(conn, 4, k);
                    assert!(key > 1_000_000);
                    assert!(seen.insert(key), "{name} {conn} {k}");
                }
            }
        }
        let s = InsertSeq::for_instance(11, None);
        assert_eq!(
            (s.key(0, 2, 0), s.key(1, 2, 0), s.key(0, 2, 1)),
            (11, 12, 13)
        );
    }
}
