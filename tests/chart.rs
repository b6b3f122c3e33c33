//! The Helm chart's tests (render with Helm's engine, strict lint, schema validation, assertions),
//! run from `cargo test` so one command runs everything. `RAMJET_BIN` lets them check every flag
//! the chart passes against the real binary's `--help`.

use std::process::Command;

#[test]
fn helm_chart_renders_lints_and_validates() {
    let root = env!("CARGO_MANIFEST_DIR");
    let status = Command::new("bash")
        .arg(format!("{root}/tests/chart/run.sh"))
        .env("RAMJET_BIN", env!("CARGO_BIN_EXE_ramjet"))
        .current_dir(root)
        .status()
        .expect("run tests/chart/run.sh");
    assert!(status.success(), "chart tests failed (see output above)");
}
