//! PNG charts of the report (plotters, bitmap backend, DejaVu Sans from the system).

use plotters::prelude::*;
use plotters::style::FontStyle;

/// Registers a system TrueType font as "sans-serif" once; `None` when there is none.
pub fn font() -> Option<&'static str> {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
        ];
        candidates.iter().any(|p| {
            std::fs::read(p).ok().is_some_and(|bytes| {
                // plotters keeps registered fonts for the life of the program.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    });
    ok.then_some("sans-serif")
}

const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// The series legend, upper left, over a light background.
fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, CT>,
    font: &str,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((font, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// One group of bars: its name and one (daemon, seconds) per bar.
pub type BarGroup = (String, Vec<(String, Option<f64>)>);

/// Grouped bars on a log scale: one group per scenario, one bar per daemon; a missing value
/// (failed or not run) leaves a gap.
pub fn bars(path: &std::path::Path, font: &str, groups: &[BarGroup]) -> Result<(), String> {
    let values = groups.iter().flat_map(|g| g.1.iter().filter_map(|v| v.1));
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if groups.is_empty() || lo > hi {
        return Ok(());
    }
    let (lo, hi) = ((lo / 2.0).max(1e-3), hi * 2.0);
    let series = groups.first().map_or(0, |g| g.1.len()).max(1);
    let root = BitMapBackend::new(path, (1200, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Convergence time by scenario (log scale, lower is better)",
            (font, 22),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups.len() as f64, (lo..hi).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 {
                groups.get(i).map(|g| g.0.clone()).unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("seconds")
        .label_style((font, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    let width = 0.8 / series as f64;
    for s in 0..series {
        let name = groups
            .iter()
            .find_map(|g| g.1.get(s).map(|v| v.0.clone()))
            .unwrap_or_default();
        let c = color(s);
        chart
            .draw_series(groups.iter().enumerate().filter_map(|(i, g)| {
                let v = g.1.get(s)?.1?;
                let x0 = i as f64 + 0.1 + s as f64 * width;
                Some(Rectangle::new(
                    [(x0, lo), (x0 + width * 0.9, v)],
                    c.filled(),
                ))
            }))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
    }
    legend(&mut chart, font)?;
    root.present().map_err(|e| e.to_string())
}

/// What a line chart shows: its title and axes.
pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    /// The x values are thousands (routes): labelled "200k".
    pub x_thousands: bool,
}

/// The convergence report's chart: seconds against routes announced.
pub const CONVERGENCE_BY_ROUTES: Axes<'static> = Axes {
    title: "Convergence time against routes (real tables, log-log)",
    x: "routes announced",
    y: "seconds",
    x_thousands: true,
};

/// One line per series (a daemon, a size), both axes on a log scale: a daemon's slope shows
/// how it scales, and the spread between daemons is wide.
pub fn lines(
    path: &std::path::Path,
    font: &str,
    axes: &Axes<'_>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let pts = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .filter(|(x, y)| *x > 0.0 && *y > 0.0);
    let (xmin, xmax, ymin, ymax) = pts
        .fold((f64::MAX, 0f64, f64::MAX, 0f64), |(a, b, c, d), (x, y)| {
            (a.min(x), b.max(x), c.min(y), d.max(y))
        });
    if xmax <= 0.0 {
        return Ok(());
    }
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.title, (font, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (xmin / 1.5..xmax * 1.5).log_scale(),
            ((ymin / 2.0).max(1e-3)..ymax * 2.0).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_label_formatter(&|x| {
            if axes.x_thousands {
                format!("{:.0}k", x / 1000.0)
            } else {
                format!("{x:.0}")
            }
        })
        .label_style((font, 14))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, p)) in series.iter().enumerate() {
        if p.is_empty() {
            continue;
        }
        let c = color(i);
        chart
            .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(p.iter().map(|pt| Circle::new(*pt, 3, c.filled())))
            .map_err(|e| e.to_string())?;
    }
    legend(&mut chart, font)?;
    root.present().map_err(|e| e.to_string())
}
