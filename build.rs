//! Names the commit the binary was built from, for `--version` and the `ramjet_build_info`
//! metric: `RAMJET_COMMIT` and `RAMJET_COMMIT_DATE` when the build sets them (the Dockerfile's
//! build arguments: its context has no `.git`), else git's answer, else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = std::env::var("RAMJET_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let date = std::env::var("RAMJET_COMMIT_DATE")
        .ok()
        .filter(|d| !d.is_empty())
        .or_else(|| git(&["log", "-1", "--format=%cs"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RAMJET_COMMIT={commit}");
    println!("cargo:rustc-env=RAMJET_COMMIT_DATE={date}");
    println!("cargo:rerun-if-env-changed=RAMJET_COMMIT");
    println!("cargo:rerun-if-env-changed=RAMJET_COMMIT_DATE");
    // A new commit moves HEAD (or the branch it names).
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
