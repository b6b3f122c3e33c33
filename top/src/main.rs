//! `ramjet-top`: the terminal UI for a ramjet replica's generations, traffic, pin and release.
//! Everything lives in the `ramjet_top` library; this only parses the flags.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    ramjet_top::run(ramjet_top::TopCli::parse())
}
