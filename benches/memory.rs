//! Bytes each generation adds per route: ten generations of a 10,000-route table kept in the
//! history ring, each differing from the last by one route. Counts live heap bytes with a counting
//! allocator. Budget: about 100 bytes per route per generation; ten generations a few MB.
//!
//! `cargo bench --bench memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Arc;

use ramjet_control::apply::Applier;
use ramjet_control::audit::AuditTrail;
use ramjet_control::compile::{static_routes, Compiler};
use ramjet_control::routes_file::parse;
use ramjet_shared::Published;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY (of the impl): every call forwards to the system allocator unchanged; only a counter is
// added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const ROUTES: usize = 10_000;
const GENERATIONS: usize = 10;

fn main() {
    let text = |variant: usize| {
        let mut yaml = String::from("backends:\n");
        for b in 0..20 {
            yaml.push_str(&format!("  b{b}: {{ endpoints: [\"10.0.{b}.1:8080\"] }}\n"));
        }
        yaml.push_str("routes:\n");
        for r in 0..ROUTES {
            let backend = if r == variant { (r + 1) % 20 } else { r % 20 };
            yaml.push_str(&format!(
                "  - {{ host: h{}.example.com, path: /p{}, backend: b{backend} }}\n",
                r / 10,
                r % 10
            ));
        }
        parse(&yaml, Path::new("."), "bench.yaml").unwrap()
    };
    let configs: Vec<_> = (0..=GENERATIONS).map(text).collect();
    let published = Arc::new(Published::new());
    let applier = Applier::new(published.clone(), GENERATIONS, AuditTrail::default(), Arc::default());
    let mut compiler = Compiler::new();
    let mut apply = |i: usize| {
        let draft = static_routes::compile(&configs[i], &mut compiler);
        applier.apply(compiler.finish(draft).expect("new generation"));
    };
    let before_first = LIVE.load(Relaxed);
    apply(0);
    let first = LIVE.load(Relaxed) - before_first;
    let before_rest = LIVE.load(Relaxed);
    for i in 1..GENERATIONS {
        apply(i);
    }
    let rest = LIVE.load(Relaxed) - before_rest;
    let per_generation = rest as f64 / (GENERATIONS - 1) as f64;
    println!("routes per table:                    {ROUTES}");
    println!(
        "first generation (whole table):      {:.2} MB ({:.0} bytes/route)",
        first as f64 / 1e6,
        first as f64 / ROUTES as f64
    );
    println!(
        "each further generation (one edit):  {:.1} KB ({:.1} bytes/route/generation)",
        per_generation / 1e3,
        per_generation / ROUTES as f64
    );
    println!("{GENERATIONS} generations in the ring:           {:.2} MB", (first + rest) as f64 / 1e6);
}
