//! The whole machine's CPU from /proc/stat, read before and after a run: what other processes
//! and the hypervisor (steal) took while loadgen measured. Either makes the numbers suspect.

use crate::result::MachineLoad;

/// Clock ticks per second of /proc/stat (USER_HZ, 100 on every Linux ABI).
const TICK_NS: u64 = 10_000_000;

/// The machine's CPU counters at one moment, in ticks summed over all cores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    busy: u64,
    steal: u64,
    cores: usize,
}

impl Stat {
    /// Now, from /proc/stat (None off Linux or when it cannot be read).
    pub fn read() -> Option<Stat> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The load over `wall_ns` since `self`, given `own_ns`: CPU time loadgen and the server
    /// (when it runs here) took over the same span.
    pub fn load_since(&self, now: &Stat, wall_ns: u64, own_ns: u64) -> Option<MachineLoad> {
        let all_ns = wall_ns as f64 * self.cores as f64;
        if all_ns <= 0.0 {
            return None;
        }
        let busy_ns = now.busy.saturating_sub(self.busy) * TICK_NS;
        let steal_ns = now.steal.saturating_sub(self.steal) * TICK_NS;
        let share = |ns: u64| ((ns as f64 / all_ns).min(1.0) * 1000.0).round() / 1000.0;
        Some(MachineLoad {
            cores: self.cores,
            steal_share: share(steal_ns),
            others_share: share(busy_ns.saturating_sub(own_ns)),
        })
    }
}

/// The `cpu` line's busy ticks (user, nice, system, irq, softirq; guest time is in user) and
/// steal, and the number of `cpuN` lines.
fn parse(text: &str) -> Option<Stat> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    let cores = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(Stat {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        steal: at(7),
        cores: cores.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_steal_and_cores_from_proc_stat() {
        let text = "cpu  100 5 20 900 7 3 2 40 0 0\ncpu0 50 0 10 450 0 0 0 20 0 0\n\
                    cpu1 50 5 10 450 7 3 2 20 0 0\nintr 1 2\n";
        let s = parse(text).unwrap();
        assert_eq!((s.busy, s.steal, s.cores), (130, 40, 2));
        // One second later on 2 cores: 100 more busy ticks (1 s), of which loadgen took 0.4 s.
        let later = Stat {
            busy: 230,
            steal: 60,
            cores: 2,
        };
        let l = s.load_since(&later, 1_000_000_000, 400_000_000).unwrap();
        assert_eq!((l.steal_share, l.others_share), (0.1, 0.3));
    }
}
