//! The Go test peers (h2spec, grpcurl), built from the pins in `tests/tools` by
//! `tests/tools/build.sh` once per machine and cached under `target/go-tools/<stamp>/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The directory holding `h2spec` and `grpcurl`, built on first use.
pub fn go_tools() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| go_build("tests/tools/build.sh", "h2spec and grpcurl"))
}

/// Runs a build script of Go test peers (`tests/*/build.sh`: pinned, cached, a file lock so test
/// binaries running at once build once) and returns the directory it printed. A missing Go
/// toolchain (exit 127) gets a message that says how to fix it.
pub fn go_build(script: &str, what: &str) -> PathBuf {
    let script = format!("{}/{script}", crate::repo_root().display());
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    match out.status.code() {
        Some(0) => {}
        Some(127) => panic!(
            "these tests need Go (>= 1.24) to build {what} once per machine: install Go \
             (https://go.dev/dl) or put it on PATH; {script} said so above"
        ),
        _ => panic!("{script} failed ({}); its output is above", out.status),
    }
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

pub fn h2spec() -> PathBuf {
    go_tools().join("h2spec")
}

pub fn grpcurl() -> PathBuf {
    go_tools().join("grpcurl")
}
