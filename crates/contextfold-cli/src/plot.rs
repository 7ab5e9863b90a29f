//! `contextfold replay --plot FILE.svg`: request tokens per call and total cost per strategy.
//!
//! The legend has a column of its own beside the chart, so it never covers the window
//! lines; each strategy has its own color and dash pattern, and a curve the same as an
//! earlier strategy's is drawn a few pixels above it, so strategies with the same curve all
//! stay visible.
//!
//! plotters is built without a font backend (no `ttf`, no `ab_glyph`): its SVG backend writes
//! text as `<text>` elements for the viewer to render, and layout uses plotters' built-in width
//! estimate, so no font file is read, bundled or looked up at run time.

use crate::output::thousands;
use anyhow::Context;
use contextfold::replay::StrategyResult;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// One window's row of the figure.
pub struct WindowPlot<'a> {
    /// The window.
    pub window: u64,
    /// The first file's results at this window (one series per strategy).
    pub series: &'a [StrategyResult],
    /// The results summed over all files at this window.
    pub totals: &'a [StrategyResult],
    /// How many files `totals` covers.
    pub files: usize,
}

const WIDTH: u32 = 1500;
const ROW_HEIGHT: u32 = 460;
const FONT: &str = "sans-serif";

/// Distinct colors (Tableau 10), one per strategy in the order given.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(index: usize) -> RGBColor {
    COLORS[index % COLORS.len()]
}

/// (dash, gap) in pixels of strategy `index`'s line; (0, 0) is solid, for the first only.
/// One pattern per color, of different lengths, so no two strategies are drawn alike.
const DASHES: [(u32, u32); 10] = [(0, 0), (12, 6), (5, 5), (18, 4), (3, 7), (9, 3), (14, 9), (2, 4), (22, 6), (7, 11)];

/// Pixels between a curve and an earlier strategy's identical one.
const SAME_CURVE_LIFT: f64 = 3.0;

fn dash(index: usize) -> (u32, u32) {
    DASHES[index % DASHES.len()]
}

/// The share of a row's line-chart area that the legend column takes.
const LEGEND_SHARE: u32 = 18;

/// Writes the figure to `path`: one row per window, request tokens per call of the first
/// file (`file`) on the left, total cost per strategy over all files on the right.
pub fn write(path: &Path, file: &str, reserve: u64, windows: &[WindowPlot]) -> anyhow::Result<()> {
    let mut svg = String::new();
    let rows = u32::try_from(windows.len().max(1)).unwrap_or(u32::MAX);
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, ROW_HEIGHT.saturating_mul(rows))).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let areas = root.split_evenly((windows.len().max(1), 1));
        let name = Path::new(file).file_name().map_or(file.to_string(), |name| name.to_string_lossy().into_owned());
        for (area, plot) in areas.iter().zip(windows) {
            let (left, right) = area.split_horizontally(WIDTH * 62 / 100);
            let (chart, legend) = left.split_horizontally(WIDTH * 62 / 100 * (100 - LEGEND_SHARE) / 100);
            line_chart(&chart, &name, reserve, plot)?;
            legend_column(&legend, plot)?;
            cost_chart(&right, plot)?;
        }
        root.present().map_err(draw_error)?;
    }
    std::fs::write(path, svg).with_context(|| format!("{}: cannot write the plot", path.display()))
}

fn draw_error(err: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("cannot draw the plot: {err}")
}

fn line_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    file: &str,
    reserve: u64,
    plot: &WindowPlot,
) -> anyhow::Result<()> {
    let usable = plot.window.saturating_sub(reserve);
    let calls = plot.series.iter().map(|result| result.request_tokens.len()).max().unwrap_or(0).max(2);
    let peak = plot.series.iter().flat_map(|result| result.request_tokens.iter().copied()).max().unwrap_or(0);
    let y_max = (peak.max(plot.window) as f64 * 1.08).max(1.0);
    let x_max = calls as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{file}, window {}", thousands(plot.window)), (FONT, 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(1f64..x_max, 0f64..y_max)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("call")
        .y_desc("request tokens")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| thousands(y.round() as u64))
        .max_light_lines(2)
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(220, 220, 220))
        .label_style((FONT, 13))
        .draw()
        .map_err(draw_error)?;

    // The windows: the full one dotted, the usable one (less the reserve) dashed.
    let label = (FONT, 13).into_font().color(&BLACK);
    for (tokens, text, style, dash) in [
        (plot.window, format!("window {}", thousands(plot.window)), RGBColor(150, 150, 150).stroke_width(1), 3),
        (usable, format!("window \u{2212} reserve {}", thousands(usable)), BLACK.stroke_width(2), 9),
    ] {
        let y = tokens as f64;
        chart.draw_series(DashedLineSeries::new([(1.0, y), (x_max, y)], dash, 5, style)).map_err(draw_error)?;
        // On the left, where the requests are still small, above the line.
        let anchor = label.clone().pos(Pos::new(HPos::Left, VPos::Bottom));
        chart.draw_series([Text::new(text, (1.0 + x_max * 0.01, y), anchor)]).map_err(draw_error)?;
    }

    // Tokens per pixel of height, to lift a curve drawn already by an earlier strategy.
    let per_pixel = y_max / f64::from(chart.plotting_area().dim_in_pixel().1.max(1));
    for (index, result) in plot.series.iter().enumerate() {
        let color = color(index);
        let same = plot.series[..index].iter().filter(|earlier| earlier.request_tokens == result.request_tokens);
        let lift = same.count() as f64 * SAME_CURVE_LIFT * per_pixel;
        let points: Vec<(f64, f64)> = result
            .request_tokens
            .iter()
            .enumerate()
            .map(|(call, tokens)| ((call + 1) as f64, *tokens as f64 + lift))
            .collect();
        match dash(index) {
            (0, _) => {
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
                    .map_err(draw_error)?;
            }
            (size, gap) => {
                chart
                    .draw_series(DashedLineSeries::new(points.iter().copied(), size, gap, color.stroke_width(2)))
                    .map_err(draw_error)?;
            }
        }
        // Compactions: a small ring on the line at each call that compacted.
        let marks = result.compaction_steps.iter().filter_map(|step| points.get(*step).copied());
        chart
            .draw_series(marks.map(|point| Circle::new(point, 4, ShapeStyle::from(color).stroke_width(2))))
            .map_err(draw_error)?;
    }
    Ok(())
}

/// The legend beside the line chart: a sample of each strategy's line, then the compaction
/// mark.
fn legend_column<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, plot: &WindowPlot) -> anyhow::Result<()> {
    let label = (FONT, 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let row = |index: usize| 60 + 20 * index as i32;
    for (index, result) in plot.series.iter().enumerate() {
        let (y, color) = (row(index), color(index));
        let sample = [(8, y), (38, y)];
        match dash(index) {
            (0, _) => area.draw(&PathElement::new(sample, color.stroke_width(3))).map_err(draw_error)?,
            (size, gap) => area
                .draw(&DashedPathElement::new(sample, size.div_ceil(2), gap.div_ceil(2), color.stroke_width(3)))
                .map_err(draw_error)?,
        }
        area.draw(&Text::new(result.strategy.clone(), (46, y), label.clone())).map_err(draw_error)?;
    }
    let y = row(plot.series.len());
    area.draw(&Circle::new((23, y), 4, BLACK.stroke_width(2))).map_err(draw_error)?;
    area.draw(&Text::new("compaction", (46, y), label.clone())).map_err(draw_error)?;
    Ok(())
}

fn cost_chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, plot: &WindowPlot) -> anyhow::Result<()> {
    let count = plot.totals.len().max(1);
    let max_cost = plot.totals.iter().map(|result| result.cost_usd).fold(0.0, f64::max);
    let x_max = if max_cost > 0.0 { max_cost * 1.35 } else { 1.0 };
    let names: Vec<&str> = plot.totals.iter().map(|result| result.strategy.as_str()).collect();
    let sessions = if plot.files == 1 { "1 session".to_string() } else { format!("{} sessions", plot.files) };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("total cost, {sessions}, window {}", thousands(plot.window)), (FONT, 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(150)
        .build_cartesian_2d(0f64..x_max, (0..count - 1).into_segmented())
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("US dollars")
        .x_labels(6)
        .x_label_formatter(&|x| format!("${x:.2}"))
        .y_labels(count)
        .y_label_formatter(&|value| match value {
            SegmentValue::CenterOf(row) => (count - 1)
                .checked_sub(*row)
                .and_then(|i| names.get(i))
                .map(|name| name.to_string())
                .unwrap_or_default(),
            _ => String::new(),
        })
        .max_light_lines(2)
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(220, 220, 220))
        .label_style((FONT, 13))
        .draw()
        .map_err(draw_error)?;
    let label = (FONT, 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (index, result) in plot.totals.iter().enumerate() {
        let row = count - 1 - index;
        let mut bar = Rectangle::new(
            [(0.0, SegmentValue::Exact(row)), (result.cost_usd, SegmentValue::Exact(row + 1))],
            color(index).filled(),
        );
        bar.set_margin(5, 5, 0, 0);
        let ratio =
            if result.cost_vs_none.is_finite() { format!("{:.2}\u{d7}", result.cost_vs_none) } else { "-".to_string() };
        let text = Text::new(
            format!(" {ratio}  ${:.2}", result.cost_usd),
            (result.cost_usd, SegmentValue::CenterOf(row)),
            label.clone(),
        );
        chart.draw_series([bar]).map_err(draw_error)?;
        chart.draw_series([text]).map_err(draw_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points of every polyline drawn in `stroke`, one list per polyline.
    fn polylines(svg: &str, stroke: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("<polyline")
            .skip(1)
            .filter(|element| element.contains(&format!("stroke=\"{stroke}\"")))
            .filter_map(|element| element.split("points=\"").nth(1)?.split('"').next())
            .map(|points| {
                points
                    .split(' ')
                    .filter_map(|point| {
                        let (x, y) = point.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect()
            })
            .collect()
    }

    /// Regression (identical curves hid each other: the first and the sixth strategy were
    /// both solid, so `anthropic-clear` covered `none` wherever neither compacted): no two
    /// strategies share a dash pattern, and a curve the same as an earlier one is drawn
    /// above it, apart.
    #[test]
    fn hardening_18_identical_curves_are_drawn_apart() {
        let patterns: std::collections::HashSet<(u32, u32)> = (0..COLORS.len()).map(dash).collect();
        assert_eq!(patterns.len(), COLORS.len(), "a dash pattern per color");
        const { assert!(SAME_CURVE_LIFT >= 2.0, "identical curves lie further apart than a line is wide") };
        let same = |strategy: &str| StrategyResult {
            strategy: strategy.into(),
            request_tokens: vec![1_000, 2_000, 3_000, 3_000, 4_000],
            ..StrategyResult::default()
        };
        let series: Vec<StrategyResult> = ["none", "a", "b", "c", "d", "e"].into_iter().map(same).collect();
        let dir = std::env::temp_dir().join(format!("contextfold-plot-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("same.svg");
        let window = WindowPlot { window: 8_000, series: &series, totals: &series, files: 1 };
        write(&path, "same.json", 1_000, &[window]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // `none` is one solid polyline (then its legend sample, to the right); each later
        // strategy's dashes run parallel to it, the later the higher (smaller y), none on it.
        let none = polylines(&svg, "#1F77B4");
        assert_eq!(none.len(), 2, "the curve and the legend's sample: {none:?}");
        let line = &none[0];
        let end = line.last().map_or(0.0, |point| point.0);
        let at = |x: f64| {
            let segment = line.windows(2).find(|pair| pair[0].0 <= x && x <= pair[1].0).expect("within the curve");
            let ((x0, y0), (x1, y1)) = (segment[0], segment[1]);
            if x1 == x0 {
                y0
            } else {
                y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            }
        };
        for (index, _) in series.iter().enumerate().skip(1) {
            let RGBColor(r, g, b) = color(index);
            let dashes = polylines(&svg, &format!("#{r:02X}{g:02X}{b:02X}"));
            assert!(!dashes.is_empty(), "strategy {index} is drawn");
            for (x, y) in dashes.iter().flatten().filter(|point| point.0 <= end) {
                let above = at(*x) - y;
                let expected = index as f64 * SAME_CURVE_LIFT;
                assert!(
                    (above - expected).abs() < 1.5,
                    "strategy {index} at x {x}: {above} px above `none`, not {expected}"
                );
            }
        }
    }
}
