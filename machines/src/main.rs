//! The `voxlane` command-line interface.

use std::process::ExitCode;

fn main() -> ExitCode {
    voxlane_machines::cli::main()
}
