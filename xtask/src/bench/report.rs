//! Bench rows, their JSON form and the markdown table.

use super::BenchOptions;
use serde_json::json;

/// One measurement beside its reference.
#[derive(Debug, Clone)]
pub struct Row {
    /// Kernel or stage name.
    pub kernel: &'static str,
    /// Weight / compute type.
    pub dtype: &'static str,
    /// Problem shape.
    pub shape: String,
    /// Thread budget.
    pub threads: usize,
    /// Our value.
    pub ours: f64,
    /// Unit of `ours` and `reference_value` (higher is better).
    pub unit: &'static str,
    /// What the reference is.
    pub reference: String,
    /// The reference's value.
    pub reference_value: f64,
    /// The ratio `ours / reference_value` this row must reach.
    pub target: f64,
}

impl Row {
    /// `ours / reference_value`.
    pub fn ratio(&self) -> f64 {
        self.ours / self.reference_value
    }
}

fn markdown(target: &str, rows: &[Row]) -> String {
    let mut s = format!(
        "## voxlane bench: {target}\n\n| kernel | dtype | shape | threads | route | ours | reference | ratio | target |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    let route = voxlane_actors::kernels::cpu::route_name();
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {route} | {:.2} {} | {} {:.2} | {:.2} | ≥ {:.2} {} |\n",
            r.kernel,
            r.dtype,
            r.shape,
            r.threads,
            r.ours,
            r.unit,
            r.reference,
            r.reference_value,
            r.ratio(),
            r.target,
            if r.ratio() >= r.target { "✓" } else { "✗" }
        );
    }
    s
}

/// Print the table and write the requested files.
pub fn emit(target: &str, rows: &[Row], opts: &BenchOptions) -> Result<(), String> {
    let md = markdown(target, rows);
    println!("{md}");
    if let Some(path) = &opts.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.json {
        let route = voxlane_actors::kernels::cpu::route_name();
        let list: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "kernel": r.kernel, "dtype": r.dtype, "shape": r.shape, "threads": r.threads, "route": route,
                    "ours": r.ours, "unit": r.unit, "reference": r.reference,
                    "reference_value": r.reference_value, "ratio": r.ratio(), "target": r.target,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
