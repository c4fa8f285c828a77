//! `loadgen compare`: B against A, per target and per op, as percentages with 95% CIs and a
//! word (faster, slower, no significant difference). The CIs come from each run's own
//! intervals (`precision`), so two runs are enough; see docs/statistics.md.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::merge::Input;
use crate::result::{OpResult, Percentiles, RunResult};
use crate::stats::{difference, Difference, Estimate, Figures, Precision};

mod fail_if;
mod text;

pub use fail_if::{FailIf, Tripped};
pub use text::render;

/// What a comparison holds: which runs, what differs between them, a row per target and op.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    /// The baseline and the one compared with it (`file` or `file: target`).
    pub a: String,
    pub b: String,
    /// Settings or targets that differ between the two, compared because asked (`--force`,
    /// or two targets of one result); empty when they are alike.
    pub differs: Vec<String>,
    pub rows: Vec<Row>,
}

/// One target (or one op of it): B's figures against A's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// The target as the reports name it (its label, or its kind).
    pub target: String,
    /// The op of a mix, none for the run as a whole.
    pub op: Option<String>,
    pub figures: Vec<Change>,
}

/// One figure's change.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Change {
    /// qps, p50, p99 or p99.9.
    pub figure: String,
    pub a: f64,
    pub b: f64,
    /// B / A - 1 and its 95% CI; none when a run has no CI for it (`why`).
    pub difference: Option<Difference>,
    /// faster, slower, or no significant difference (or none, with `why`).
    pub word: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The figures compared, as (name, the run's value, its CI, made on the logarithms).
fn figures<'a>(
    p: &'a Percentiles,
    qps: f64,
    f: &'a Figures,
) -> [(&'static str, f64, &'a Precision, bool); 4] {
    [
        ("qps", qps, &f.qps, false),
        ("p50", p.p50, &f.p50, true),
        ("p99", p.p99, &f.p99, true),
        ("p99.9", p.p999, &f.p999, true),
    ]
}

/// B's figures against A's: a figure found in both runs, with a CI in both, gets a difference.
fn changes(
    a: (&Percentiles, f64, Option<&Figures>),
    b: (&Percentiles, f64, Option<&Figures>),
) -> Vec<Change> {
    let none = Figures::none("a result file from before loadgen had CIs");
    let (fa, fb) = (a.2.unwrap_or(&none), b.2.unwrap_or(&none));
    figures(a.0, a.1, fa)
        .into_iter()
        .zip(figures(b.0, b.1, fb))
        .map(|((name, va, pa, log), (_, vb, pb, _))| {
            let est = |v: f64, p: &Precision| match p {
                Precision::Ci(c) => {
                    Estimate::of(v, c, log).ok_or_else(|| "too few batches".to_string())
                }
                Precision::None { none } => Err(none.clone()),
            };
            match (est(va, pa), est(vb, pb)) {
                (Ok(ea), Ok(eb)) => {
                    let d = difference(&ea, &eb);
                    Change {
                        figure: name.into(),
                        a: va,
                        b: vb,
                        word: word(name, &d).into(),
                        difference: Some(d),
                        why: None,
                    }
                }
                (Err(w), _) | (_, Err(w)) => Change {
                    figure: name.into(),
                    a: va,
                    b: vb,
                    difference: None,
                    word: "no CI".into(),
                    why: Some(w),
                },
            }
        })
        .collect()
}

/// A rate is faster when it rises; a latency when it falls.
fn word(figure: &str, d: &Difference) -> &'static str {
    match (d.significant, figure == "qps", d.change > 0.0) {
        (false, _, _) => "no significant difference",
        (true, true, true) | (true, false, false) => "faster",
        _ => "slower",
    }
}

/// The rows of B's run against A's: the run, then each op both have.
fn rows(a: &RunResult, b: &RunResult) -> Vec<Row> {
    let name = run_name(b);
    let mut rows = vec![Row {
        target: name.clone(),
        op: None,
        figures: changes(
            (&a.latency_us, a.qps, a.precision.as_ref()),
            (&b.latency_us, b.qps, b.precision.as_ref()),
        ),
    }];
    for (op, oa) in &a.ops {
        let Some(ob) = b.ops.get(op) else { continue };
        rows.push(Row {
            target: name.clone(),
            op: Some(op.clone()),
            figures: changes(side(oa), side(ob)),
        });
    }
    rows
}

/// An op's figures as `changes` takes them.
fn side(o: &OpResult) -> (&Percentiles, f64, Option<&Figures>) {
    (&o.latency_us, o.qps, o.precision.as_ref())
}

/// A run as the reports name it: its label, else its kind.
fn run_name(r: &RunResult) -> String {
    r.label.clone().unwrap_or_else(|| r.kind.clone())
}

/// Settings that differ between two files (the seed aside: another key stream of the same
/// run is the same experiment).
fn settings_differ(a: &Input, b: &Input) -> Vec<String> {
    let (Ok(serde_json::Value::Object(sa)), Ok(serde_json::Value::Object(sb))) = (
        serde_json::to_value(&a.file.settings),
        serde_json::to_value(&b.file.settings),
    ) else {
        return Vec::new();
    };
    let keys: std::collections::BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
    keys.into_iter()
        .filter(|k| !["seed", "seeds"].contains(&k.as_str()))
        .filter(|k| sa.get(*k) != sb.get(*k))
        .map(|k| {
            let show =
                |v: Option<&serde_json::Value>| v.map_or("none".to_string(), |v| v.to_string());
            format!("{k} {} vs {}", show(sa.get(k)), show(sb.get(k)))
        })
        .collect()
}

/// Refuses a file without runs to compare (a sweep, an SLO search, or none).
fn runs_of(x: &Input) -> Result<&[RunResult], ConfigError> {
    if !x.file.sweeps.is_empty() || !x.file.slo.is_empty() {
        return Err(ConfigError(format!(
            "{} is a sweep or an SLO search: compare reads the runs of `loadgen run` (or merge) files",
            x.name
        )));
    }
    match x.file.runs.is_empty() {
        true => Err(ConfigError(format!("{} has no runs to compare", x.name))),
        false => Ok(&x.file.runs),
    }
}

/// Two files: each run of B against the run of A at its place. One file: each run after the
/// first against the first (two targets of one result, compared because asked).
pub fn compare(a: &Input, b: Option<&Input>, force: bool) -> Result<Comparison, ConfigError> {
    let ra = runs_of(a)?;
    let Some(b) = b else {
        if ra.len() < 2 {
            return Err(ConfigError(format!(
                "{} has one run: give two result files, or one of several targets",
                a.name
            )));
        }
        let first = run_name(&ra[0]);
        let differs = ra[1..]
            .iter()
            .map(|r| format!("target {first} vs {}", run_name(r)))
            .collect();
        return Ok(Comparison {
            a: format!("{}: {first}", a.name),
            b: format!("{}: the other targets", a.name),
            differs,
            rows: ra[1..].iter().flat_map(|r| rows(&ra[0], r)).collect(),
        });
    };
    let rb = runs_of(b)?;
    if ra.len() != rb.len() {
        return Err(ConfigError(format!(
            "{} has {} runs and {} has {}: compare files of the same targets",
            a.name,
            ra.len(),
            b.name,
            rb.len()
        )));
    }
    let mut differs = settings_differ(a, b);
    for (x, y) in ra.iter().zip(rb) {
        if x.kind != y.kind || x.target != y.target {
            differs.push(format!("target {} vs {}", x.target, y.target));
        }
    }
    if !differs.is_empty() && !force {
        return Err(ConfigError(format!(
            "{} and {} differ ({}): compare them anyway with --force",
            a.name,
            b.name,
            differs.join(", ")
        )));
    }
    Ok(Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        differs,
        rows: ra.iter().zip(rb).flat_map(|(x, y)| rows(x, y)).collect(),
    })
}

#[cfg(test)]
mod tests;
