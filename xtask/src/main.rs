//! voxlane developer tasks: `cargo xtask diagrams [--check]`, `fetch-models`, `bench`.

mod bench;
mod diagrams;
mod fetch_models;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  diagrams [--check]   write diagrams/<machine>.mmd and diagrams/README.md from the
                       machines' transition tables (--check: fail if the files differ)
  fetch-models         download the Kokoro int8 model, vocab and voices into
                       $VOXLANE_HOME (default ~/.cache/voxlane)
  bench kernels [--json FILE] [--md FILE] [--threads 1,2] [--quick]
                       kernel speed beside a reference measured in the same run
  bench mimi|kokoro|moshi|converse   model stages beside onnxruntime/PyTorch
  bench serve [--long-words N]       `voxlane serve` under load: first chunk,
                       throughput, beside Kokoro-FastAPI and onnxruntime";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("diagrams") => diagrams::run(args.iter().any(|a| a == "--check")),
        Some("fetch-models") => fetch_models::run(),
        Some("bench") => bench::run(&args[1..]),
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown task `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
