// SPDX-License-Identifier: GPL-2.0
//! A minimal SVG line chart (no plotting dependency).

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// Legend.
    pub name: String,
    /// Points (x index, y).
    pub points: Vec<(usize, f64)>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// Renders `panels` (title, y label, log-y, series) side by side, sharing
/// the categorical x axis `xs`.
pub fn svg(title: &str, xs: &[String], panels: &[(String, String, bool, Vec<Series>)]) -> String {
    let pw = 460.0;
    let ph = 320.0;
    let (ml, mr, mt, mb) = (70.0, 20.0, 40.0, 50.0);
    let legend_h = 20.0 * 4.0 + 10.0;
    let width = panels.len() as f64 * pw;
    let height = ph + legend_h + 30.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="18" text-anchor="middle" font-size="15">{title}</text>"#,
        width / 2.0
    );
    for (pi, (ptitle, ylabel, logy, series)) in panels.iter().enumerate() {
        let x0 = pi as f64 * pw + ml;
        let x1 = (pi + 1) as f64 * pw - mr;
        let y0 = 30.0 + ph - mb;
        let y1 = 30.0 + mt;
        let tf = |v: f64| if *logy { v.max(1e-9).log10() } else { v };
        let vals: Vec<f64> = series
            .iter()
            .flat_map(|se| se.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .collect();
        let (mut lo, mut hi) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(tf(v)), b.max(tf(v)))
            });
        if !lo.is_finite() {
            lo = 0.0;
            hi = 1.0;
        }
        if *logy {
            lo = lo.floor();
            hi = hi.ceil().max(lo + 1.0);
        } else {
            lo = 0.0_f64.min(lo);
            hi = if hi <= lo { lo + 1.0 } else { hi };
            // A round top: 1, 2 or 5 times a power of ten per tick.
            let raw = (hi - lo) / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .into_iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag);
            hi = lo + step * 5.0;
        }
        let px = |i: usize| {
            if xs.len() <= 1 {
                (x0 + x1) / 2.0
            } else {
                x0 + (x1 - x0) * i as f64 / (xs.len() - 1) as f64
            }
        };
        let py = |v: f64| y0 - (y0 - y1) * (tf(v) - lo) / (hi - lo);
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="13">{ptitle}</text><line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>"#,
            (x0 + x1) / 2.0,
            y1 - 10.0
        );
        let _ = write!(
            s,
            r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle">{ylabel}</text>"#,
            x0 - 50.0,
            (y0 + y1) / 2.0
        );
        for (i, x) in xs.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{x}</text>"#,
                px(i),
                y0 + 16.0
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">loss rate</text>"#,
            (x0 + x1) / 2.0,
            y0 + 34.0
        );
        let ticks = 5;
        for k in 0..=ticks {
            let t = lo + (hi - lo) * k as f64 / ticks as f64;
            let v = if *logy { 10f64.powf(t) } else { t };
            let y = y0 - (y0 - y1) * k as f64 / ticks as f64;
            let label = if v >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            };
            let _ = write!(
                s,
                r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{label}</text>"##,
                x0 - 4.0,
                y + 4.0
            );
        }
        for (si, se) in series.iter().enumerate() {
            // One colour per combination; per-packet series dashed.
            let c = COLORS[si % 4];
            let dash = if se.name.contains("per-packet") {
                r#" stroke-dasharray="6,3""#
            } else {
                ""
            };
            let pts: Vec<String> = se
                .points
                .iter()
                .filter(|p| p.1.is_finite())
                .map(|&(i, v)| format!("{:.1},{:.1}", px(i), py(v)))
                .collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
                pts.join(" ")
            );
            for p in &pts {
                let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#);
            }
            if pi == 0 {
                let lx = 20.0 + (si % 2) as f64 * (width / 2.0);
                let ly = 30.0 + ph + 10.0 + (si / 2) as f64 * 20.0;
                let _ = write!(
                    s,
                    r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                    lx + 30.0,
                    lx + 36.0,
                    ly + 4.0,
                    se.name
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}
