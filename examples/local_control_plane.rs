//! Runs the same Kubernetes control plane the cluster tests use — etcd and kube-apiserver, built
//! from `tests/k8s` by `tests/k8s/build.sh` on first use — on loopback until interrupted, and
//! prints how to reach it. See docs/local-control-plane.md.
//!
//!     cargo run --example local_control_plane
//!
//! Ctrl-C stops both processes (they die with this one).

use ramjet_test_support::control_plane;

fn main() {
    let plane = control_plane::ControlPlane::start("local");
    let bin = control_plane::k8s_bin();
    println!("kube-apiserver is ready at {}", plane.url);
    println!();
    println!("  export KUBECONFIG={}", plane.admin_kubeconfig.display());
    println!("  export PATH={}:$PATH   # kubectl", bin.display());
    println!();
    println!("  admin kubeconfig (group system:masters): {}", plane.admin_kubeconfig.display());
    println!("  audit log (every write):                 {}", plane.audit_log().display());
    println!("  logs:                                    {}/{{apiserver,etcd}}.log", plane.dir.display());
    println!();
    println!("Ctrl-C stops etcd and kube-apiserver.");
    loop {
        std::thread::park();
    }
}
