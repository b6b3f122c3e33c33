//! `ramjet-top`: the terminal UI for a ramjet replica's generations, traffic, pin and release.
//! Everything lives in [`ramjet::top`]; this only parses the flags.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    ramjet::top::run(ramjet::top::TopCli::parse())
}
