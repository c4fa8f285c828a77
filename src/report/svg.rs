//! Small, dependency-free SVG charts for the result files: a bar chart (the comparison table)
//! and a line chart (QPS against connections, log x, for sweeps).

use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 80.0;
const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum at or above `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn header(out: &mut String, title: &str, y_label: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="24" text-anchor="middle" font-size="16">{}</text>
<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>
"#,
        W / 2.0,
        esc(title),
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    );
}

fn y_axis(out: &mut String, max: f64) {
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=5 {
        let v = max * i as f64 / 5.0;
        let y = H - BOTTOM - plot_h * i as f64 / 5.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            crate::report::text::thousands(v.round() as u64)
        );
    }
}

/// Bars with their value on top, one per (label, value).
pub fn bar_chart(title: &str, y_label: &str, bars: &[(String, f64)]) -> String {
    let mut out = String::new();
    header(&mut out, title, y_label);
    let max = nice_max(bars.iter().map(|b| b.1).fold(0.0, f64::max));
    y_axis(&mut out, max);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / bars.len().max(1) as f64;
    for (i, (label, v)) in bars.iter().enumerate() {
        let h = plot_h * v / max;
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let y = H - BOTTOM - h;
        let _ = writeln!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            slot * 0.7,
            COLORS[i % COLORS.len()],
            x + slot * 0.35,
            y - 5.0,
            crate::report::text::thousands(v.round() as u64),
            x + slot * 0.35,
            H - BOTTOM + 18.0,
            esc(label)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// One line per series over a log2 x axis (connection counts).
pub fn line_chart_log_x(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let mut out = String::new();
    header(&mut out, title, y_label);
    let max = nice_max(
        series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    y_axis(&mut out, max);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0.max(1.0).log2()))
        .collect();
    let (x0, x1) = (
        xs.iter().cloned().fold(f64::INFINITY, f64::min),
        xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    );
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + plot_w * (x.max(1.0).log2() - x0) / span;
    let py = |y: f64| H - BOTTOM - plot_h * y / max;
    let mut ticks: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .collect();
    ticks.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    ticks.dedup();
    for t in ticks {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t}</text>"#,
            px(t),
            H - BOTTOM + 18.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        H - BOTTOM + 40.0,
        esc(x_label)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (x, y) in pts {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                px(*x),
                py(*y)
            );
        }
        let ly = H - 20.0;
        let lx = LEFT + 160.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{c}"/><text x="{}" y="{ly}">{}</text>"#,
            ly - 10.0,
            lx + 16.0,
            esc(name)
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_and_carry_the_values() {
        let b = bar_chart(
            "t",
            "qps",
            &[("pg".into(), 12345.0), ("hs".into(), 98765.0)],
        );
        assert!(b.starts_with("<svg") && b.trim_end().ends_with("</svg>"));
        assert!(b.contains("98,765") && b.contains(">pg<"));
        let l = line_chart_log_x(
            "t",
            "connections",
            "qps",
            &[("pg".into(), vec![(1.0, 10.0), (4.0, 40.0), (16.0, 35.0)])],
        );
        assert_eq!(l.matches("<circle").count(), 3);
        assert_eq!(nice_max(87.0), 100.0);
        assert_eq!(nice_max(120.0), 200.0);
    }
}
