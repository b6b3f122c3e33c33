//! `ramjet-top`: the terminal UI for a ramjet replica's generations, traffic, pin and release.
//! Everything lives in the `ramjet_top` library; this only parses the flags.

use std::process::ExitCode;

use clap::Parser;

fn main() -> anyhow::Result<ExitCode> {
    let cli = ramjet_top::TopCli::parse();
    if ramjet_top::prints(&cli) {
        // Exit 2 when some replica did not answer (the others did what was asked).
        return Ok(if ramjet_top::run_fleet(&cli)? { ExitCode::SUCCESS } else { ExitCode::from(2) });
    }
    ramjet_top::run(cli)?;
    Ok(ExitCode::SUCCESS)
}
