//! When each request is due. One pacer for every mode; the request loop asks it for the due
//! time of request n of its connection and never sleeps on its own account.
//!
//! Closed loop: no due time, send as soon as the window has room.
//! Fixed rate R over C connections: connection i sends request n at `(i + n*C) / R` seconds
//! after the start, so the C connections interleave into one evenly spaced stream of rate R
//! (this also works for R < C and fractional R). Poisson: each connection draws exponential
//! gaps with mean C/R; the superposition of C Poisson streams is a Poisson stream of rate R.
//! Due times are absolute, so a late timer (tokio ticks in milliseconds) is caught up by the
//! following requests: the average rate holds and the lag histogram shows the slop.

use crate::keys::Rng;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    Uniform,
    Poisson,
}

#[derive(Clone, Debug)]
pub enum Pacer {
    Closed,
    Fixed {
        first_ns: f64,
        gap_ns: f64,
    },
    Poisson {
        mean_gap_ns: f64,
        rng: Rng,
        n: u64,
        at_ns: f64,
    },
}

impl Pacer {
    /// The pacer of connection `conn` out of `conns` for a total `rate` (None: closed loop).
    pub fn new(rate: Option<f64>, arrival: Arrival, conn: u64, conns: u64, seed: u64) -> Pacer {
        match rate {
            None => Pacer::Closed,
            Some(r) => {
                let gap_ns = 1e9 * conns as f64 / r;
                match arrival {
                    Arrival::Uniform => Pacer::Fixed {
                        first_ns: 1e9 * conn as f64 / r,
                        gap_ns,
                    },
                    Arrival::Poisson => Pacer::Poisson {
                        mean_gap_ns: gap_ns,
                        rng: Rng::new(seed ^ 0x5eed_0000 ^ conn),
                        n: 0,
                        at_ns: 0.0,
                    },
                }
            }
        }
    }

    /// Nanoseconds after the start at which request `n` (0-based) of this connection is due;
    /// None in closed loop. Pure for `Fixed`; for `Poisson` it must be called with n = 0, 1, 2...
    pub fn due_ns(&mut self, n: u64) -> Option<u64> {
        match self {
            Pacer::Closed => None,
            Pacer::Fixed { first_ns, gap_ns } => Some((*first_ns + *gap_ns * n as f64) as u64),
            Pacer::Poisson {
                mean_gap_ns,
                rng,
                n: at_n,
                at_ns,
            } => {
                while *at_n <= n {
                    // inverse transform; 1 - unit() is in (0, 1]
                    *at_ns += -(1.0 - rng.unit()).ln() * *mean_gap_ns;
                    *at_n += 1;
                }
                Some(*at_ns as u64)
            }
        }
    }

    /// The first request at or after `n` due at or after `t_ns` (n itself in closed loop).
    /// For `Poisson` the same rule as `due_ns`: `n` no lower than any asked before.
    pub fn first_due_from(&mut self, n: u64, t_ns: u64) -> u64 {
        let mut k = match self {
            Pacer::Closed => return n,
            // An estimate from the formula, then settled on the exact (rounded) due times.
            Pacer::Fixed { first_ns, gap_ns } => {
                (((t_ns as f64 - *first_ns) / *gap_ns).ceil().max(0.0) as u64).max(n)
            }
            Pacer::Poisson { .. } => n,
        };
        while k > n && self.due_ns(k - 1).is_some_and(|d| d >= t_ns) {
            k -= 1;
        }
        while self.due_ns(k).is_some_and(|d| d < t_ns) {
            k += 1;
        }
        k
    }

    pub fn is_paced(&self) -> bool {
        !matches!(self, Pacer::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_loop_has_no_due_time() {
        assert_eq!(Pacer::new(None, Arrival::Uniform, 0, 1, 0).due_ns(5), None);
    }

    #[test]
    fn fixed_rate_exact_due_times() {
        // 1000/s over 4 connections: each connection every 4 ms, offset by 1 ms.
        let mut p = Pacer::new(Some(1000.0), Arrival::Uniform, 1, 4, 0);
        assert_eq!(p.due_ns(0), Some(1_000_000));
        assert_eq!(p.due_ns(1), Some(5_000_000));
        assert_eq!(p.due_ns(10), Some(41_000_000));
    }

    #[test]
    fn connections_interleave_into_one_even_stream() {
        let conns = 3;
        let mut all: Vec<u64> = (0..conns)
            .flat_map(|c| {
                let mut p = Pacer::new(Some(300.0), Arrival::Uniform, c, conns, 0);
                (0..100).map(move |n| p.due_ns(n).unwrap())
            })
            .collect();
        all.sort_unstable();
        for w in all.windows(2) {
            let gap = w[1] - w[0];
            assert!((3_333_332..=3_333_334).contains(&gap), "gap {gap}");
        }
    }

    #[test]
    fn fractional_rate_and_rate_below_connections() {
        // 0.5/s over 4 connections: connection 3's first request at 6 s, then every 8 s.
        let mut p = Pacer::new(Some(0.5), Arrival::Uniform, 3, 4, 0);
        assert_eq!(p.due_ns(0), Some(6_000_000_000));
        assert_eq!(p.due_ns(2), Some(22_000_000_000));
        // 2.5/s over 1 connection
        let mut p = Pacer::new(Some(2.5), Arrival::Uniform, 0, 1, 0);
        assert_eq!(p.due_ns(5), Some(2_000_000_000));
    }

    #[test]
    fn first_due_from_skips_exactly_the_requests_due_before() {
        // 1000/s over 4 connections, connection 1: due at 1, 5, 9, 13... ms.
        let mut p = Pacer::new(Some(1000.0), Arrival::Uniform, 1, 4, 0);
        assert_eq!(p.first_due_from(0, 9_000_000), 2);
        assert_eq!(p.first_due_from(0, 9_000_001), 3);
        assert_eq!(p.first_due_from(5, 9_000_000), 5);
        assert_eq!(p.first_due_from(0, 0), 0);
        let mut p = Pacer::new(Some(10_000.0), Arrival::Poisson, 0, 1, 7);
        let k = p.first_due_from(0, 50_000_000);
        let mut q = Pacer::new(Some(10_000.0), Arrival::Poisson, 0, 1, 7);
        assert!(q.due_ns(k - 1).unwrap() < 50_000_000);
        assert!(q.due_ns(k).unwrap() >= 50_000_000);
        assert_eq!(Pacer::Closed.first_due_from(3, 1 << 40), 3);
    }

    #[test]
    fn poisson_mean_and_spread() {
        let mut p = Pacer::new(Some(10_000.0), Arrival::Poisson, 0, 1, 42);
        let n = 200_000u64;
        let last = p.due_ns(n - 1).unwrap() as f64;
        let mean_gap = last / n as f64;
        assert!(
            (mean_gap - 100_000.0).abs() / 100_000.0 < 0.01,
            "mean gap {mean_gap}"
        );
        // exponential gaps: the coefficient of variation is 1
        let mut p = Pacer::new(Some(10_000.0), Arrival::Poisson, 0, 1, 42);
        let mut prev = 0u64;
        let gaps: Vec<f64> = (0..n)
            .map(|i| {
                let d = p.due_ns(i).unwrap();
                let g = (d - prev) as f64;
                prev = d;
                g
            })
            .collect();
        let m = gaps.iter().sum::<f64>() / n as f64;
        let sd = (gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((sd / m - 1.0).abs() < 0.02, "cv {}", sd / m);
    }
}
