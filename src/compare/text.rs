//! A comparison as text: a line per target (and op), each figure's change with its 95% CI and
//! its word.

use std::fmt::Write;

use super::fail_if::row_name;
use super::{Change, Comparison};
use crate::report::text::{micros, thousands};

pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare    {} (B) against {} (A): B / A - 1, 95% CI",
        c.b, c.a
    );
    if !c.differs.is_empty() {
        let _ = writeln!(out, "differs    {}", c.differs.join(", "));
    }
    for row in &c.rows {
        let _ = writeln!(out, "\n{}", row_name(row));
        for ch in &row.figures {
            let _ = writeln!(out, "  {}", line(ch));
        }
    }
    out
}

/// `qps    30,692 -> 33,010   +7.6% [+5.1%, +10.2%]  faster`.
fn line(ch: &Change) -> String {
    let show = |v: f64| match ch.figure.as_str() {
        "qps" => thousands(v.round() as u64),
        _ => micros(v),
    };
    let change = match (&ch.difference, &ch.why) {
        (Some(d), _) => format!(
            "{:+.1}% [{:+.1}%, {:+.1}%]  {}",
            d.change * 100.0,
            d.low * 100.0,
            d.high * 100.0,
            ch.word
        ),
        (None, why) => format!("no CI: {}", why.as_deref().unwrap_or("none")),
    };
    format!(
        "{:<6} {:>10} -> {:<10} {change}",
        ch.figure,
        show(ch.a),
        show(ch.b)
    )
}
