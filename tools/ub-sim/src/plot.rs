// SPDX-License-Identifier: GPL-2.0
//! Charts of simulation results against the packet loss rate, drawn with
//! `plotters`' SVG backend (text stays `<text>`, so no font file is read).
//!
//! The x axis is logarithmic with one tick per decade (`1e-4`, `1e-3`, ...).
//! A loss rate of 0 has no place on a log axis; it gets its own tick, `0`,
//! one decade left of the first positive rate. The y axes are linear from 0
//! with a round step (1, 2 or 5 × 10^k), so every tick label is a short
//! round number.

use std::fmt;
use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// One line of a chart.
pub struct Series {
    /// Legend.
    pub name: String,
    /// Colour (an index into the palette; series that belong together,
    /// such as one combination under two load balancings, share one).
    pub colour: usize,
    /// Drawn dashed instead of solid.
    pub dashed: bool,
    /// Points (loss rate, value). Points whose value is not finite (a run
    /// that delivered nothing has no latency) are left out.
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title, the y axis description (with its unit) and lines.
pub struct Panel {
    /// Title above the chart.
    pub title: String,
    /// y axis description, with the unit, e.g. "goodput (Gb/s)".
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// Why a chart could not be drawn.
#[derive(Debug)]
pub enum PlotError {
    /// A loss rate that is not a probability.
    Loss(f64),
    /// `plotters` failed.
    Draw(String),
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Loss(p) => write!(f, "loss rate {p} is not in [0, 1]"),
            Self::Draw(e) => write!(f, "drawing the chart: {e}"),
        }
    }
}

impl std::error::Error for PlotError {}

fn draw_err(e: impl fmt::Display) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Line colours (colour-blind-safe, Okabe–Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

const PANEL_W: u32 = 560;
const PANEL_H: u32 = 400;
const TITLE_H: u32 = 40;
const LEGEND_ROW_H: u32 = 26;
const LEGEND_COLUMNS: usize = 4;
const FONT: &str = "sans-serif";
// Text sizes as plotters takes them (its SVG backend writes them / 1.24).
const TITLE_PT: u32 = 24;
const CAPTION_PT: u32 = 21;
const DESC_PT: u32 = 19;
const LABEL_PT: u32 = 18;

/// At most this many intervals between y ticks.
const MAX_Y_INTERVALS: i64 = 8;

/// Round linear ticks covering `lo..=hi`: multiples of a step of 1, 2 or
/// 5 × 10^k, the smallest step giving at most [`MAX_Y_INTERVALS`]
/// intervals. Returns the ticks and the decimals their labels need.
pub fn linear_ticks(lo: f64, hi: f64) -> (Vec<f64>, usize) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo, lo + 1.0)
    } else {
        (0.0, 1.0)
    };
    let mut exp = ((hi - lo) / MAX_Y_INTERVALS as f64).log10().floor() as i32;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let step = m * 10f64.powi(exp);
            let first = (lo / step).floor() as i64;
            let last = (hi / step).ceil() as i64;
            if last - first <= MAX_Y_INTERVALS {
                let ticks = (first..=last).map(|i| i as f64 * step).collect();
                let decimals = usize::try_from(exp.saturating_neg()).unwrap_or(0);
                return (ticks, decimals);
            }
        }
        exp += 1;
    }
}

/// An axis whose ticks (labelled) and grid lines (light, unlabelled) are
/// given rather than computed. (`plotters`' own `with_key_points` would do,
/// but loses the label formatting of a plain `f64` range.)
struct Ticked<R> {
    inner: R,
    ticks: Vec<f64>,
    light: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

/// The x axis: decades from `first` to `last` (exponents of ten), and the
/// position standing for a loss rate of 0 if one is plotted.
struct LossAxis {
    first: i32,
    last: i32,
    zero_at: Option<f64>,
}

impl LossAxis {
    fn new(rates: impl Iterator<Item = f64>) -> Result<Self, PlotError> {
        let (mut lo, mut hi, mut zero) = (f64::INFINITY, f64::NEG_INFINITY, false);
        for p in rates {
            if !(0.0..=1.0).contains(&p) {
                return Err(PlotError::Loss(p));
            }
            if p == 0.0 {
                zero = true;
            } else {
                lo = lo.min(p);
                hi = hi.max(p);
            }
        }
        let (mut first, mut last) = if lo.is_finite() {
            (lo.log10().floor() as i32, hi.log10().ceil() as i32)
        } else {
            (-4, -1)
        };
        if last == first {
            // One decade at least, kept within rates of at most 1.
            if last < 0 {
                last += 1;
            } else {
                first -= 1;
            }
        }
        let zero_at = zero.then(|| 10f64.powi(first - 1));
        Ok(Self {
            first,
            last,
            zero_at,
        })
    }

    /// Where a loss rate is drawn.
    fn position(&self, p: f64) -> f64 {
        match self.zero_at {
            Some(z) if p == 0.0 => z,
            _ => p,
        }
    }

    fn range(&self) -> Range<f64> {
        let left = if self.zero_at.is_some() {
            self.first - 1
        } else {
            self.first
        };
        // A quarter of a decade of margin on each side.
        10f64.powf(f64::from(left) - 0.25)..10f64.powf(f64::from(self.last) + 0.25)
    }

    fn ticks(&self) -> Vec<f64> {
        self.zero_at
            .into_iter()
            .chain((self.first..=self.last).map(|e| 10f64.powi(e)))
            .collect()
    }

    /// Light grid lines at 2 and 5 within each decade.
    fn minor_ticks(&self) -> Vec<f64> {
        (self.first..self.last)
            .flat_map(|e| [2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .collect()
    }

    fn label(&self, v: f64) -> String {
        if Some(v) == self.zero_at {
            return "0".into();
        }
        match v.log10().round() as i32 {
            0 => "1".into(),
            e => format!("1e{e}"),
        }
    }
}

/// Renders `panels` side by side over a shared loss-rate axis, under
/// `title`, with one legend (of the first panel's series: every panel is
/// expected to draw the same series) below. Returns the SVG document.
pub fn loss_chart(title: &str, panels: &[Panel]) -> Result<String, PlotError> {
    let axis = LossAxis::new(
        panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| s.points.iter().map(|pt| pt.0)),
    )?;
    let legend = panels.first().map_or(&[][..], |p| &p.series[..]);
    let legend_rows = legend.len().div_ceil(LEGEND_COLUMNS);
    let legend_h = LEGEND_ROW_H * u32::try_from(legend_rows).unwrap_or(0) + 16;
    let columns = u32::try_from(panels.len().max(1)).unwrap_or(1);
    let size = (PANEL_W * columns, TITLE_H + PANEL_H + legend_h);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let root = root
            .titled(title, (FONT, TITLE_PT).into_font())
            .map_err(draw_err)?;
        let (charts, legend_area) = root.split_vertically(PANEL_H);
        for (panel, area) in panels
            .iter()
            .zip(charts.split_evenly((1, panels.len().max(1))))
        {
            draw_panel(&area, &axis, panel)?;
        }
        draw_legend(&legend_area, legend)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    axis: &LossAxis,
    panel: &Panel,
) -> Result<(), PlotError> {
    let values = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite());
    let (lo, hi) = values.fold((0.0_f64, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (yticks, decimals) = linear_ticks(lo, hi);
    let ybottom = yticks.first().copied().unwrap_or(0.0);
    let ytop = yticks.last().copied().unwrap_or(1.0);

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, CAPTION_PT).into_font())
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            Ticked {
                inner: LogCoord::from(axis.range().log_scale()),
                ticks: axis.ticks(),
                light: axis.minor_ticks(),
            },
            Ticked {
                inner: RangedCoordf64::from(ybottom..ytop),
                ticks: yticks,
                light: vec![],
            },
        )
        .map_err(draw_err)?;
    let xfmt = |v: &f64| axis.label(*v);
    let yfmt = |v: &f64| format!("{v:.decimals$}");
    chart
        .configure_mesh()
        .x_desc("packet loss rate (log scale)")
        .y_desc(panel.y_label.as_str())
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .label_style((FONT, LABEL_PT).into_font())
        .axis_desc_style((FONT, DESC_PT).into_font())
        .bold_line_style(RGBColor(200, 200, 200))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(draw_err)?;

    for s in &panel.series {
        let colour = PALETTE[s.colour % PALETTE.len()];
        let style = colour.stroke_width(2);
        let mut pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(x, y)| (axis.position(x), y))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                .map_err(draw_err)?;
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(draw_err)?;
        }
        chart
            .draw_series(pts.into_iter().map(|p| marker(p, colour, s.dashed)))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The point marker: filled circles on solid lines, open ones on dashed.
fn marker<C>(at: C, colour: RGBColor, dashed: bool) -> Circle<C, u32> {
    let style = if dashed {
        colour.stroke_width(2)
    } else {
        colour.filled()
    };
    Circle::new(at, 4, style)
}

fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    series: &[Series],
) -> Result<(), PlotError> {
    let (w, _) = area.dim_in_pixel();
    let cell = i32::try_from(w).unwrap_or(i32::MAX) / LEGEND_COLUMNS as i32;
    for (i, s) in series.iter().enumerate() {
        let col = (i % LEGEND_COLUMNS) as i32;
        let row = (i / LEGEND_COLUMNS) as i32;
        let (x, y) = (20 + col * cell, 12 + row * LEGEND_ROW_H as i32);
        let colour = PALETTE[s.colour % PALETTE.len()];
        let style = colour.stroke_width(2);
        let line = [(x, y), (x + 36, y)];
        if s.dashed {
            area.draw(&DashedPathElement::new(line, 8, 5, style))
                .map_err(draw_err)?;
        } else {
            area.draw(&PathElement::new(line, style))
                .map_err(draw_err)?;
        }
        area.draw(&marker((x + 18, y), colour, s.dashed))
            .map_err(draw_err)?;
        area.draw(&Text::new(
            s.name.as_str(),
            (x + 44, y - 8),
            (FONT, LABEL_PT).into_font(),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        for (hi, want_step, want_top) in [
            (98.7, 20.0, 100.0),
            (1430.1, 200.0, 1600.0),
            (8.5, 2.0, 10.0),
            (0.37, 0.05, 0.4),
        ] {
            let (t, _) = linear_ticks(0.0, hi);
            assert_eq!(t[0], 0.0);
            assert!((t[1] - want_step).abs() < 1e-9, "{hi}: {t:?}");
            assert!((t.last().unwrap() - want_top).abs() < 1e-9, "{hi}: {t:?}");
            assert!(t.len() as i64 - 1 <= MAX_Y_INTERVALS);
        }
        assert_eq!(linear_ticks(0.0, 0.37).1, 2);
        assert_eq!(linear_ticks(0.0, 1430.1).1, 0);
        // Degenerate data (nothing finite, or one value) still gives an axis.
        assert_eq!(linear_ticks(0.0, f64::NEG_INFINITY).0.len(), 6);
        assert!(linear_ticks(5.0, 5.0).0.len() >= 2);
    }

    #[test]
    fn loss_axis_has_decade_ticks_and_a_zero_slot() {
        let a = LossAxis::new([0.0, 1e-4, 1e-3, 1e-2].into_iter()).unwrap();
        let labels: Vec<String> = a.ticks().into_iter().map(|v| a.label(v)).collect();
        assert_eq!(labels, ["0", "1e-4", "1e-3", "1e-2"].map(String::from));
        assert!(a.position(0.0) < 1e-4 && a.position(0.0) > 0.0);
        // Rates between decades sit between decade ticks.
        let a = LossAxis::new([3e-3, 0.5].into_iter()).unwrap();
        let labels: Vec<String> = a.ticks().into_iter().map(|v| a.label(v)).collect();
        assert_eq!(labels, ["1e-3", "1e-2", "1e-1", "1"].map(String::from));
        assert!(matches!(
            LossAxis::new([1.5].into_iter()),
            Err(PlotError::Loss(_))
        ));
    }
}
