//! `steerd simulate --plot`: a PNG of how a crowd flowed, drawn from the run's
//! [`SeriesRow`]s — agents arrived, on their way, stuck and gave up over simulated time above,
//! the mean speed of those on their way below (while any are).
//!
//! Text is drawn with the bundled DejaVu Sans Mono (`server/assets/`, its licence beside it),
//! so the plot looks the same on every machine and needs no system fonts.

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::simulate::SeriesRow;

/// Plot width, pixels.
pub const WIDTH: u32 = 1200;
/// Plot height, pixels.
pub const HEIGHT: u32 = 760;

/// The font family the plot registers and draws with.
const FAMILY: &str = "steerd-plot";
static FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");

/// Why a plot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The run was shorter than one simulated second.
    #[error("nothing to plot: the run has no whole simulated second (run more --ticks than the scenario's tick_rate)")]
    Empty,
    /// The bundled font did not load.
    #[error("the plot's bundled font is invalid")]
    Font,
    /// Drawing failed.
    #[error("drawing the plot: {0}")]
    Draw(String),
    /// PNG encoding failed.
    #[error("encoding the plot as PNG: {0}")]
    Encode(#[from] image::ImageError),
}

/// One line of the counts chart: its legend, colour, and value of a row.
type Line = (&'static str, RGBColor, fn(&SeriesRow) -> usize);

fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// The series of one run as a PNG image ([`WIDTH`] × [`HEIGHT`]); `title` heads it.
pub fn series_png(title: &str, rows: &[SeriesRow]) -> Result<Vec<u8>, PlotError> {
    let last = rows.last().ok_or(PlotError::Empty)?;
    register_font(FAMILY, FontStyle::Normal, FONT).map_err(|_| PlotError::Font)?;
    let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let root = root.titled(title, (FAMILY, 24)).map_err(draw_err)?;
        let (top, bottom) = root.split_vertically(HEIGHT * 62 / 100);
        let seconds = last.second.max(1) as f64;
        let most = rows.iter().map(|r| r.arrived + r.gave_up + r.on_the_way).max().unwrap_or(0).max(1) as f64;

        let mut counts = ChartBuilder::on(&top)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..seconds, 0.0..most * 1.05)
            .map_err(draw_err)?;
        counts
            .configure_mesh()
            .x_desc("simulated seconds")
            .y_desc("agents")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(draw_err)?;
        let lines: [Line; 4] = [
            ("arrived", RGBColor(0x1b, 0x9e, 0x3e), |r| r.arrived),
            ("on the way", RGBColor(0x1f, 0x62, 0xc4), |r| r.on_the_way),
            ("stuck (no progress for 10 s)", RGBColor(0xd6, 0x2a, 0x2a), |r| r.stuck),
            ("gave up", BLACK, |r| r.gave_up),
        ];
        for (label, color, value) in lines {
            counts
                .draw_series(LineSeries::new(rows.iter().map(|r| (r.second as f64, value(r) as f64)), color.stroke_width(2)))
                .map_err(draw_err)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        counts
            .configure_series_labels()
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::MiddleRight)
            .draw()
            .map_err(draw_err)?;

        let fastest = rows.iter().map(|r| f64::from(r.mean_speed)).filter(|v| v.is_finite()).fold(0.0, f64::max).max(0.1);
        let mut speed = ChartBuilder::on(&bottom)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..seconds, 0.0..fastest * 1.1)
            .map_err(draw_err)?;
        speed
            .configure_mesh()
            .x_desc("simulated seconds")
            .y_desc("mean speed on the way (units/s)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(draw_err)?;
        let orange = RGBColor(0xe0, 0x7b, 0x00);
        speed
            .draw_series(LineSeries::new(
                rows.iter().filter(|r| r.on_the_way > 0 && r.mean_speed.is_finite()).map(|r| (r.second as f64, f64::from(r.mean_speed))),
                orange.stroke_width(2),
            ))
            .map_err(draw_err)?;
        root.present().map_err(draw_err)?;
    }
    let mut png = Vec::new();
    image::ImageEncoder::write_image(image::codecs::png::PngEncoder::new(&mut png), &rgb, WIDTH, HEIGHT, image::ColorType::Rgb8)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(second: u64, arrived: usize, on_the_way: usize, stuck: usize) -> SeriesRow {
        SeriesRow { second, arrived, gave_up: 0, stuck, on_the_way, mean_speed: on_the_way as f32 * 0.01, max_penetration: None }
    }

    #[test]
    fn a_series_is_a_png_of_the_stated_size_with_its_lines_drawn() {
        let rows: Vec<SeriesRow> = (0..=60).map(|s| row(s, s as usize * 5, 300 - s as usize * 5, if s < 30 { 10 } else { 0 })).collect();
        let png = series_png("counterflow", &rows).expect("plot");
        let img = image::load_from_memory_with_format(&png, image::ImageFormat::Png).expect("decodes as PNG").to_rgb8();
        assert_eq!(img.dimensions(), (WIDTH, HEIGHT));
        // Each series' colour appears: the lines were drawn, not only the axes.
        for (name, c) in [("arrived", [0x1b, 0x9e, 0x3e]), ("on the way", [0x1f, 0x62, 0xc4]), ("stuck", [0xd6, 0x2a, 0x2a]), ("speed", [0xe0, 0x7b, 0x00])] {
            let n = img.pixels().filter(|p| p.0 == c).count();
            assert!(n > 50, "{name}: {n} pixels of its colour");
        }
    }

    #[test]
    fn an_empty_series_is_refused() {
        assert!(matches!(series_png("x", &[]), Err(PlotError::Empty)));
    }
}
