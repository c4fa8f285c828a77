//! Key streams: uniform, sequential, scrambled zipfian (YCSB) and hotspot; seeded, reproducible.
//!
//! Every connection owns a `KeyGen` seeded from (seed, connection index), so the same seed gives
//! the same key stream per connection whatever the target, and no state is shared between threads.

use crate::error::ConfigError;
use std::sync::Arc;

/// How keys are drawn from the range.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Uniform,
    /// Connection i of C walks i, i+C, i+2C, ... (wrapping): with `-n` equal to the range size,
    /// every key is asked exactly once.
    Seq,
    /// YCSB scrambled zipfian with exponent `s` (0 < s < 1 here, as in YCSB; default 0.99).
    Zipf(f64),
    /// A fraction `keys` of the range (its low end) gets a fraction `ops` of the lookups.
    Hot {
        keys: f64,
        ops: f64,
    },
}

impl Dist {
    pub fn parse(s: &str) -> Result<Dist, ConfigError> {
        let bad = || {
            format!("bad --dist '{s}': expected uniform, seq, zipf[:S] (0<S<1) or hot:F:P (0<F<1, 0<P<1)")
        };
        let mut parts = s.split(':');
        match parts.next().unwrap_or("") {
            "uniform" if parts.next().is_none() => Ok(Dist::Uniform),
            "seq" if parts.next().is_none() => Ok(Dist::Seq),
            "zipf" => {
                let s_ = match parts.next() {
                    None => 0.99,
                    Some(v) => v.parse::<f64>().map_err(|_| bad())?,
                };
                if parts.next().is_some() || !(s_ > 0.0 && s_ < 1.0) {
                    return Err(bad().into());
                }
                Ok(Dist::Zipf(s_))
            }
            "hot" => {
                let f = parts
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(bad)?;
                let p = parts
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(bad)?;
                if parts.next().is_some() || !(f > 0.0 && f < 1.0) || !(p > 0.0 && p < 1.0) {
                    return Err(bad().into());
                }
                Ok(Dist::Hot { keys: f, ops: p })
            }
            _ => Err(bad().into()),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Dist::Uniform => "uniform".into(),
            Dist::Seq => "seq".into(),
            Dist::Zipf(s) => format!("zipf:{s}"),
            Dist::Hot { keys, ops } => format!("hot:{keys}:{ops}"),
        }
    }
}

/// wyrand: one multiply per draw, passes BigCrush; plenty for key choice.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix the seed so nearby seeds give unrelated streams
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng(z ^ (z >> 31))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xA076_1D64_78BD_642F);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xE703_7ED1_A0B4_28DB);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// Uniform in 0..n (Lemire's multiply-shift; the bias is below 2^-40 for our ranges).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A zipfian over ranks 0..n with exponent `s`: P(rank r) = (r+1)^-s / zeta(n, s).
/// Sampled exactly by rejection-inversion (as rand_distr's Zipf), not with YCSB's Gray et al.
/// approximation, which drifts from the law at middle ranks; the scrambling of ranks over the
/// key range is YCSB's (FNV hash), so hot keys are spread out as in YCSB's scrambled zipfian.
/// Rejection-inversion never needs the normalizer zeta(n, s), so setting up costs the same for
/// any n (the tests compute zeta to check the law).
#[derive(Debug)]
pub struct Zipf {
    n: u64,
    s: f64,
    t: f64,
    q: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let nf = n as f64;
        let t = if s != 1.0 {
            (nf.powf(1.0 - s) - s) / (1.0 - s)
        } else {
            1.0 + nf.ln()
        };
        let q = if s != 1.0 { 1.0 / (1.0 - s) } else { 0.0 };
        Zipf { n, s, t, q }
    }

    fn inv_cdf(&self, p: f64) -> f64 {
        let pt = p * self.t;
        if pt <= 1.0 {
            pt
        } else if self.s != 1.0 {
            (pt * (1.0 - self.s) + self.s).powf(self.q)
        } else {
            (pt - 1.0).exp()
        }
    }

    /// Rank in 0..n, rank 0 the most popular.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let inv_b = self.inv_cdf(rng.unit());
            let x = (inv_b + 1.0).floor();
            let mut ratio = x.powf(-self.s);
            if x > 1.0 {
                ratio *= inv_b.powf(self.s);
            }
            if rng.unit() < ratio {
                return (x as u64).clamp(1, self.n) - 1;
            }
        }
    }
}

/// FNV-1a of the rank: YCSB's scrambling, so popular keys are spread over the range.
#[inline]
fn fnv(x: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for i in 0..8 {
        h ^= (x >> (i * 8)) & 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The shared, read-only part of a key stream.
#[derive(Clone, Debug)]
pub struct KeySpace {
    pub lo: u64,
    pub hi: u64,
    pub dist: Dist,
    zipf: Option<Arc<Zipf>>,
}

impl KeySpace {
    pub fn new(lo: u64, hi: u64, dist: Dist) -> KeySpace {
        let zipf = match dist {
            Dist::Zipf(s) => Some(Arc::new(Zipf::new(hi - lo + 1, s))),
            _ => None,
        };
        KeySpace { lo, hi, dist, zipf }
    }

    pub fn span(&self) -> u64 {
        self.hi - self.lo + 1
    }

    /// The key stream of connection `conn` out of `conns`.
    pub fn stream(&self, seed: u64, conn: u64, conns: u64) -> KeyGen {
        KeyGen {
            space: self.clone(),
            rng: Rng::new(seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            next_seq: conn % self.span(),
            step: conns.max(1),
        }
    }
}

/// One connection's key stream.
#[derive(Clone, Debug)]
pub struct KeyGen {
    space: KeySpace,
    rng: Rng,
    next_seq: u64,
    step: u64,
}

impl KeyGen {
    pub fn space(&self) -> &KeySpace {
        &self.space
    }

    #[inline]
    pub fn next_key(&mut self) -> u64 {
        let span = self.space.span();
        let off = match &self.space.dist {
            Dist::Uniform => self.rng.below(span),
            Dist::Seq => {
                let k = self.next_seq;
                self.next_seq = (self.next_seq + self.step) % span;
                k
            }
            Dist::Zipf(_) => {
                let z = self.space.zipf.as_ref().expect("zipf constants");
                fnv(z.sample(&mut self.rng)) % span
            }
            Dist::Hot { keys, ops } => {
                let hot = ((span as f64 * keys) as u64).clamp(1, span);
                if self.rng.unit() < *ops || hot == span {
                    self.rng.below(hot)
                } else {
                    hot + self.rng.below(span - hot)
                }
            }
        };
        self.space.lo + off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
        counts
            .iter()
            .zip(expected)
            .map(|(&o, &e)| (o as f64 - e).powi(2) / e)
            .sum()
    }

    #[test]
    fn uniform_is_uniform() {
        // 100 bins, 1e6 draws: chi-square with 99 d.o.f.; 99.9% critical value is ~148.
        let space = KeySpace::new(1, 100, Dist::Uniform);
        let mut g = space.stream(7, 0, 1);
        let mut counts = vec![0u64; 100];
        for _ in 0..1_000_000 {
            let k = g.next_key();
            assert!((1..=100).contains(&k));
            counts[(k - 1) as usize] += 1;
        }
        let chi = chi_square(&counts, &vec![10_000.0; 100]);
        assert!(chi < 148.0, "chi-square {chi}");
    }

    /// zeta(n, s) = sum of k^-s over k = 1..=n, term by term: the reference. Compensated
    /// (Neumaier) and smallest terms first, so its own rounding stays near one ulp.
    fn zeta_exact(n: u64, s: f64) -> f64 {
        let (mut sum, mut c) = (0.0f64, 0.0f64);
        for k in (1..=n).rev() {
            let x = (k as f64).powf(-s);
            let t = sum + x;
            c += if sum.abs() >= x.abs() {
                (sum - t) + x
            } else {
                (x - t) + sum
            };
            sum = t;
        }
        sum + c
    }

    /// Terms summed one by one before the Euler-Maclaurin tail takes over.
    const ZETA_HEAD: u64 = 1000;

    /// zeta(n, s) in bounded work, for the law at any n: the first terms exactly, the tail
    /// sum over k = HEAD..=n by Euler-Maclaurin (integral, end points, three Bernoulli terms;
    /// the remainder is of order HEAD^-(s+7), far below f64 rounding). Also returns how many
    /// terms were summed one by one.
    fn zeta(n: u64, s: f64) -> (f64, u64) {
        if n <= ZETA_HEAD {
            return (zeta_exact(n, s), n);
        }
        let (a, b) = (ZETA_HEAD as f64, n as f64);
        let head: f64 = (1..ZETA_HEAD).map(|k| (k as f64).powf(-s)).sum();
        // The integral of x^-s over [a, b]; expm1 keeps it exact as s approaches 1.
        let integral = if s == 1.0 {
            (b / a).ln()
        } else {
            a.powf(1.0 - s) * ((1.0 - s) * (b / a).ln()).exp_m1() / (1.0 - s)
        };
        let ends = (a.powf(-s) + b.powf(-s)) / 2.0;
        // B_2j / (2j)! times (f^(2j-1)(b) - f^(2j-1)(a)), f(x) = x^-s, whose (2j-1)th derivative
        // is -s(s+1)...(s+2j-2) x^-(s+2j-1).
        let mut corrections = 0.0;
        let mut rising = s; // s(s+1)...(s+2j-2)
        for (j, bern) in [1.0 / 12.0, -1.0 / 720.0, 1.0 / 30240.0].iter().enumerate() {
            let m = (2 * j + 1) as f64;
            if j > 0 {
                rising *= (s + m - 2.0) * (s + m - 1.0);
            }
            corrections += bern * rising * (a.powf(-s - m) - b.powf(-s - m));
        }
        (head + integral + ends + corrections, ZETA_HEAD - 1)
    }

    #[test]
    fn zeta_matches_the_exact_sum() {
        for s in [0.5, 0.99, 1.0, 1.2, 2.0] {
            for n in [1, 7, 999, 1000, 1001, 1234, 65_537, 1_000_000, 10_000_000] {
                let (fast, terms) = zeta(n, s);
                let exact = zeta_exact(n, s);
                let rel = ((fast - exact) / exact).abs();
                assert!(
                    rel < 1e-12,
                    "zeta({n}, {s}) = {fast}, exact {exact}, rel {rel:e}"
                );
                assert!(terms <= ZETA_HEAD, "zeta({n}, {s}) summed {terms} terms");
            }
        }
        // Any n costs the same bounded number of terms.
        assert_eq!(zeta(i64::MAX as u64, 0.99).1, ZETA_HEAD - 1);
        // zeta(n, 2) approaches pi^2/6 with a tail of about 1/n.
        let n = 1u64 << 32;
        let pi2_6 = std::f64::consts::PI.powi(2) / 6.0;
        let err = zeta(n, 2.0).0 - (pi2_6 - 1.0 / n as f64);
        assert!(err.abs() < 1e-13, "zeta(2^32, 2) off by {err:e}");
    }

    /// Chi-square of `draws` unscrambled ranks from Zipf(n, s) against its law:
    /// `bins` maps a 1-based rank to a bin, `mass` gives each bin's share of zeta(n, s).
    fn law_chi_square(n: u64, s: f64, draws: u64, bins: &[(u64, u64)]) -> (f64, Vec<u64>) {
        let z = Zipf::new(n, s);
        let mut rng = Rng::new(3);
        let mut counts = vec![0u64; bins.len()];
        for _ in 0..draws {
            let k = z.sample(&mut rng) + 1;
            assert!((1..=n).contains(&k), "rank {k} outside 1..={n}");
            let i = bins.partition_point(|&(_, hi)| hi < k);
            counts[i] += 1;
        }
        let total = zeta(n, s).0;
        let expected: Vec<f64> = bins
            .iter()
            .map(|&(lo, hi)| (zeta(hi, s).0 - zeta(lo - 1, s).0) / total * draws as f64)
            .collect();
        (chi_square(&counts, &expected), counts)
    }

    #[test]
    fn zipf_follows_its_law() {
        // The first 50 ranks one by one, then the tail: 50 d.o.f., 99.9% critical value ~86.7;
        // a broken generator gives thousands.
        let n = 1000;
        let mut bins: Vec<(u64, u64)> = (1..=50).map(|k| (k, k)).collect();
        bins.push((51, n));
        let draws = 1_000_000;
        let (chi, counts) = law_chi_square(n, 0.99, draws, &bins);
        assert!(chi < 86.7, "chi-square {chi}");
        // rank 0 takes about 1/zeta(n) of draws (~13% for n=1000, s=0.99)
        let top = counts[0] as f64 / draws as f64;
        let p0 = 1.0 / zeta(n, 0.99).0;
        assert!((top - p0).abs() < 0.005, "top {top} vs {p0}");
    }

    #[test]
    fn zipf_follows_its_law_over_a_huge_range() {
        // Ranks in binary octaves [2^j, 2^(j+1)) up to 2^62: the law at every scale of the
        // largest key ranges. 62 bins, 61 d.o.f.: the 99.9% critical value is ~101.
        let n = 1u64 << 62;
        let bins: Vec<(u64, u64)> = (0..62)
            .map(|j| (1u64 << j, if j == 61 { n } else { (1u64 << (j + 1)) - 1 }))
            .collect();
        let (chi, _) = law_chi_square(n, 0.99, 1_000_000, &bins);
        assert!(chi < 101.0, "chi-square {chi}");
    }

    #[test]
    fn zipf_set_up_is_the_same_work_for_any_range() {
        // Zipf::new holds no loop over the range; a summing set-up would take centuries at
        // 2^63 keys. The bound only turns such a hang into a failure.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let space = KeySpace::new(1, i64::MAX as u64, Dist::Zipf(0.99));
            let key = space.stream(1, 0, 1).next_key();
            let _ = tx.send(key);
        });
        let key = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("zipf set-up over 2^63 keys did not finish");
        assert!(key >= 1);
    }

    #[test]
    fn zipf_keys_stay_in_range_and_are_skewed() {
        let space = KeySpace::new(1, 1_000_000, Dist::Zipf(0.99));
        let mut g = space.stream(1, 0, 1);
        let mut seen = std::collections::HashMap::new();
        for _ in 0..200_000 {
            let k = g.next_key();
            assert!((1..=1_000_000).contains(&k));
            *seen.entry(k).or_insert(0u32) += 1;
        }
        let max = *seen.values().max().unwrap();
        assert!(max > 10_000, "most popular key drawn {max} times");
    }

    #[test]
    fn hotspot_fractions() {
        let space = KeySpace::new(
            1,
            10_000,
            Dist::Hot {
                keys: 0.2,
                ops: 0.8,
            },
        );
        let mut g = space.stream(9, 0, 1);
        let draws = 500_000;
        let hot = (0..draws).filter(|_| g.next_key() <= 2_000).count() as f64 / draws as f64;
        assert!((hot - 0.8).abs() < 0.005, "hot fraction {hot}");
    }

    #[test]
    fn seq_covers_every_key_once_across_connections() {
        let space = KeySpace::new(10, 109, Dist::Seq);
        let mut seen = vec![0; 100];
        for c in 0..3u64 {
            let mut g = space.stream(0, c, 3);
            let quota = 100 / 3 + u64::from(c < 100 % 3);
            for _ in 0..quota {
                seen[(g.next_key() - 10) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
    }

    #[test]
    fn same_seed_same_stream() {
        for dist in [
            Dist::Uniform,
            Dist::Zipf(0.9),
            Dist::Hot {
                keys: 0.1,
                ops: 0.9,
            },
            Dist::Seq,
        ] {
            let space = KeySpace::new(1, 1000, dist);
            let a: Vec<u64> = {
                let mut g = space.stream(5, 2, 4);
                (0..100).map(|_| g.next_key()).collect()
            };
            let b: Vec<u64> = {
                let mut g = space.stream(5, 2, 4);
                (0..100).map(|_| g.next_key()).collect()
            };
            let c: Vec<u64> = {
                let mut g = space.stream(6, 2, 4);
                (0..100).map(|_| g.next_key()).collect()
            };
            assert_eq!(a, b);
            if space.dist != Dist::Seq {
                assert_ne!(a, c);
            }
        }
    }

    #[test]
    fn dist_parsing() {
        assert_eq!(Dist::parse("zipf").unwrap(), Dist::Zipf(0.99));
        assert_eq!(Dist::parse("zipf:0.5").unwrap(), Dist::Zipf(0.5));
        assert_eq!(
            Dist::parse("hot:0.2:0.8").unwrap(),
            Dist::Hot {
                keys: 0.2,
                ops: 0.8
            }
        );
        for bad in [
            "",
            "zipf:2",
            "zipf:x",
            "hot:0.2",
            "hot:1.5:0.5",
            "gauss",
            "uniform:1",
        ] {
            assert!(Dist::parse(bad).is_err(), "{bad}");
        }
    }
}
