//! Parameter loading (`cuzk::srs::Srs::load`): bytes of a `.params` file decoded per second,
//! the file in the page cache (warm; a cold load is bounded by the disk instead — see
//! BENCHMARKS.md, "32 GiB proof, cold").
//!
//! ```text
//! cargo bench --bench params_load                               # a 2 GB synthetic file
//! CUZK_BENCH_PARAMS_GB=8 cargo bench --bench params_load
//! CUZK_BENCH_PARAMS_FILE=/path/to/x.params cargo bench --bench params_load   # a real file
//! ```
//! The synthetic file (`cuzk_dev::fixture::write_tiled_fake_params`, in the temp directory,
//! removed afterwards) has the 32 GiB PoRep file's proportions: H, L, A and B_G1 a fifth of the
//! bytes each, B_G2 the last fifth.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuzk::srs::Srs;
use cuzk_dev::fixture::write_tiled_fake_params;

fn bench(c: &mut Criterion) {
    let (path, owned) = match std::env::var("CUZK_BENCH_PARAMS_FILE") {
        Ok(p) if !p.is_empty() => (PathBuf::from(p), false),
        _ => {
            let gb: f64 = std::env::var("CUZK_BENCH_PARAMS_GB")
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| v.parse().expect("CUZK_BENCH_PARAMS_GB: a number of GB"))
                .unwrap_or(2.0);
            let fifth = (gb * 1e9 / 5.0) as usize;
            let path =
                std::env::temp_dir().join(format!("cuzk-bench-{}.params", std::process::id()));
            let g1 = fifth / 96;
            write_tiled_fake_params(&path, [g1, g1, g1, g1, fifth / 192]).expect("write params");
            (path, true)
        }
    };
    let bytes = std::fs::metadata(&path).expect("params file").len();
    // One untimed load: the file into the page cache, and a check that it loads.
    Srs::load(&path).expect("load");
    let mut g = c.benchmark_group("params_load");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Bytes(bytes));
    g.bench_function(format!("warm_{:.1}GB", bytes as f64 / 1e9), |b| {
        b.iter(|| Srs::load(&path).expect("load"))
    });
    g.finish();
    if owned {
        let _ = std::fs::remove_file(&path);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
