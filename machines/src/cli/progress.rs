//! A hand-rolled progress bar for fetches: redrawn in place on a terminal
//! (`\r[#####     ] 42% download kokoro-v1.0.int8.onnx`), plain lines otherwise
//! (CI logs, pipes) so logs get one line per step, not hundreds.

use std::io::Write;
use voxlane_runtime::fetch::{Progress, Stage};

/// Cells in the bar.
const WIDTH: usize = 24;

/// The word shown for a stage.
fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Download => "download",
        Stage::Assemble => "assemble",
    }
}

/// Whole percent done (0 when `total` is 0 and nothing is done, else capped at 100).
pub fn percent(p: &Progress) -> u64 {
    match p.total {
        0 => 100 * u64::from(p.done > 0),
        t => (p.done.min(t) * 100) / t,
    }
}

/// One bar line without the leading `\r`: `[#####     ]  42% download label`.
pub fn render(p: &Progress, label: &str) -> String {
    let pct = percent(p) as usize;
    let filled = pct * WIDTH / 100;
    format!(
        "[{}{}] {pct:>3}% {} {label}",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        stage_name(p.stage)
    )
}

/// A byte count for people: `812 B`, `1.2 kB`, `92.4 MB`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.1} GB", n as f64 / 1e9),
    }
}

/// A progress display for one labelled fetch on a writer (stderr in the CLI).
pub struct ProgressBar<W: Write> {
    out: W,
    tty: bool,
    label: String,
    /// The last stage and percent drawn, to skip redundant redraws.
    last: Option<(Stage, u64)>,
    /// Whether a `\r` line is on screen and needs a newline before other output.
    open_line: bool,
}

impl ProgressBar<std::io::Stderr> {
    /// A bar on stderr, drawn in place only when stderr is a terminal.
    pub fn stderr(label: impl Into<String>) -> Self {
        use std::io::IsTerminal;
        let err = std::io::stderr();
        let tty = err.is_terminal();
        Self::new(err, tty, label)
    }
}

impl<W: Write> ProgressBar<W> {
    /// A bar on `out`; `tty` chooses in-place redraws over plain lines.
    pub fn new(out: W, tty: bool, label: impl Into<String>) -> Self {
        Self {
            out,
            tty,
            label: label.into(),
            last: None,
            open_line: false,
        }
    }

    /// Show a progress report. Display errors are ignored: progress is cosmetic.
    pub fn update(&mut self, p: Progress) {
        let pct = percent(&p);
        let last = self.last.replace((p.stage, pct));
        if last == Some((p.stage, pct)) {
            return;
        }
        if self.tty {
            let _ = write!(self.out, "\r{}", render(&p, &self.label));
            let _ = self.out.flush();
            self.open_line = true;
        } else if last.map(|(s, _)| s) != Some(p.stage) {
            // Plain output: one line when a stage starts.
            let unit = match p.stage {
                Stage::Download => format!("{} package(s)", p.total),
                Stage::Assemble => human_bytes(p.total),
            };
            let _ = writeln!(self.out, "{}: {} {unit}", self.label, stage_name(p.stage));
        }
    }

    /// End the bar's line (a terminal's bar stays visible, completed).
    pub fn finish(&mut self, note: &str) {
        if self.open_line {
            let _ = writeln!(self.out);
            self.open_line = false;
        }
        if !note.is_empty() {
            let _ = writeln!(self.out, "{}: {note}", self.label);
        }
        let _ = self.out.flush();
    }

    /// The writer, for inspection in tests.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(stage: Stage, done: u64, total: u64) -> Progress {
        Progress { stage, done, total }
    }

    #[test]
    fn renders_bar_and_percent() {
        assert_eq!(
            render(&p(Stage::Assemble, 42, 100), "f.onnx"),
            format!(
                "[{}{}]  42% assemble f.onnx",
                "#".repeat(10),
                " ".repeat(14)
            )
        );
        assert_eq!(percent(&p(Stage::Download, 0, 0)), 0);
        assert_eq!(human_bytes(812), "812 B");
        assert_eq!(human_bytes(1_155), "1.2 kB");
        assert_eq!(human_bytes(92_361_271), "92.4 MB");
        assert_eq!(percent(&p(Stage::Download, 5, 4)), 100);
        assert!(
            render(&p(Stage::Download, 4, 4), "x").starts_with(&format!("[{}]", "#".repeat(WIDTH)))
        );
    }

    #[test]
    fn plain_output_is_one_line_per_stage() {
        let mut bar = ProgressBar::new(Vec::new(), false, "model");
        for done in 0..=4 {
            bar.update(p(Stage::Download, done, 4));
        }
        for done in (0..=10_000_000).step_by(1_000_000) {
            bar.update(p(Stage::Assemble, done, 10_000_000));
        }
        bar.finish("done");
        let text = String::from_utf8(bar.into_inner()).unwrap();
        assert_eq!(
            text,
            "model: download 4 package(s)\nmodel: assemble 10.0 MB\nmodel: done\n"
        );
    }

    #[test]
    fn terminal_output_redraws_in_place() {
        let mut bar = ProgressBar::new(Vec::new(), true, "m");
        bar.update(p(Stage::Assemble, 1, 2));
        bar.update(p(Stage::Assemble, 1, 2));
        bar.update(p(Stage::Assemble, 2, 2));
        bar.finish("");
        let text = String::from_utf8(bar.into_inner()).unwrap();
        assert_eq!(text.matches('\r').count(), 2, "{text:?}");
        assert!(text.ends_with("100% assemble m\n"), "{text:?}");
    }
}
