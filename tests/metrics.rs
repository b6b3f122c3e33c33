//! `/metrics` is valid Prometheus text: parsed by the Prometheus project's own Python parser (a
//! virtualenv under `target/`, created on first use), and by `promtool check metrics` when present.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use ramjet_dataplane::IoDriver;
use support::client::{get, request};
use support::daemon;

fn venv_python() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let venv = format!("{root}/target/metrics-venv");
    let python = format!("{venv}/bin/python");
    if !Path::new(&python).exists() {
        let ok = Command::new("python3").args(["-m", "venv", &venv]).status().is_ok_and(|s| s.success())
            && Command::new(&python)
                .args(["-m", "pip", "install", "-q", "prometheus-client==0.21.1"])
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "could not create {venv} with prometheus-client (python3-venv and PyPI are needed)");
    }
    python
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let d = daemon(
        "backends:\n  hi: { respond: { status: 200, body: \"hi\" } }\nroutes:\n  - { path: /, backend: hi }\n",
        IoDriver::IoUring,
    );
    for _ in 0..3 {
        assert_eq!(get(d.http_addr(), "h", "/").status, 200);
    }
    let text = request(d.admin_addr(), "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").body;
    assert!(text.contains("ramjet_requests_total{class=\"2xx\"} 3"), "{text}");
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
for name in ["ramjet_requests", "ramjet_upstream_errors", "ramjet_connections_active", "ramjet_pinned",
             "ramjet_serving_generation", "ramjet_publish_duration_seconds"]:
    assert name in families, name
print(len(families))
"#;
    let mut child =
        Command::new(venv_python()).args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Prometheus parser refused /metrics:\n{text}");
    if let Ok(mut promtool) =
        Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn()
    {
        std::io::Write::write_all(promtool.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
        let out = promtool.wait_with_output().unwrap();
        assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
    }
    d.shutdown();
}
