//! `compare --fail-if 'qps<-5%,p99>+10%'`: a performance gate. A condition trips when its
//! figure's difference is significant and beyond its bound (the change itself, not only its
//! interval, past the bound).

use super::{Comparison, Row};

/// Each condition: a figure, whether it trips below or above, and the bound (a share).
#[derive(Clone, Debug, PartialEq)]
pub struct FailIf {
    pub conditions: Vec<(String, bool, f64)>,
}

/// A condition that held: which row and figure, and the change.
#[derive(Clone, Debug, PartialEq)]
pub struct Tripped {
    pub what: String,
}

const FIGURES: [&str; 4] = ["qps", "p50", "p99", "p99.9"];

impl FailIf {
    /// `qps<-5%,p99>+10%`. Err is the one-line message.
    pub fn parse(s: &str) -> Result<FailIf, String> {
        let bad = |why: String| {
            format!("bad --fail-if '{s}': {why}; use FIGURE<PCT or FIGURE>PCT, comma-separated, like qps<-5%,p99>+10% (figures: qps, p50, p99, p99.9)")
        };
        let mut conditions = Vec::new();
        for part in s.split(',').map(str::trim) {
            let (at, below) = match (part.find('<'), part.find('>')) {
                (Some(i), None) => (i, true),
                (None, Some(i)) => (i, false),
                _ => return Err(bad(format!("'{part}' has no single < or >"))),
            };
            let (name, pct) = (part[..at].trim(), part[at + 1..].trim());
            let name = if name == "p999" { "p99.9" } else { name };
            if !FIGURES.contains(&name) {
                return Err(bad(format!("'{name}' is not a figure")));
            }
            let share = pct
                .strip_suffix('%')
                .and_then(|p| p.trim_start_matches('+').parse::<f64>().ok())
                .filter(|p| p.is_finite())
                .ok_or_else(|| bad(format!("'{pct}' is not a percentage")))?;
            conditions.push((name.to_string(), below, share / 100.0));
        }
        Ok(FailIf { conditions })
    }

    /// The conditions that hold in `c`, each named by its row and figure.
    pub fn tripped(&self, c: &Comparison) -> Vec<Tripped> {
        let mut out = Vec::new();
        for row in &c.rows {
            for (name, below, bound) in &self.conditions {
                let Some(ch) = row.figures.iter().find(|f| &f.figure == name) else {
                    continue;
                };
                let Some(d) = ch.difference.filter(|d| d.significant) else {
                    continue;
                };
                let beyond = if *below {
                    d.change < *bound
                } else {
                    d.change > *bound
                };
                if beyond {
                    out.push(Tripped {
                        what: format!(
                            "{} {name} {:+.1}% [{:+.1}%, {:+.1}%] (--fail-if {name}{}{:+}%)",
                            row_name(row),
                            d.change * 100.0,
                            d.low * 100.0,
                            d.high * 100.0,
                            if *below { "<" } else { ">" },
                            bound * 100.0
                        ),
                    });
                }
            }
        }
        out
    }
}

/// `postgres`, or `postgres update` for an op's row.
pub fn row_name(r: &Row) -> String {
    match &r.op {
        Some(op) => format!("{} {op}", r.target),
        None => r.target.clone(),
    }
}
