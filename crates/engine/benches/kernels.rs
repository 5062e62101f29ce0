//! Criterion benchmark of every distance kernel at every SIMD level this CPU supports.
//! Run with `cargo bench -p strata-engine --bench kernels`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use strata_engine::kernels::supported_tables;

fn kernels(c: &mut Criterion) {
    for dims in [384usize, 768, 1536] {
        let a: Vec<f32> = (0..dims).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let b: Vec<f32> = (0..dims).map(|i| ((i * 104_729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let ha: Vec<f16> = a.iter().map(|&x| f16::from_f32(x)).collect();
        let hb: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
        let mut group = c.benchmark_group(format!("kernels/{dims}d"));
        group.throughput(Throughput::Elements(dims as u64));
        for table in supported_tables() {
            let level = format!("{:?}", table.level);
            group.bench_with_input(BenchmarkId::new("l2_squared_f32", &level), &(), |bench, ()| {
                bench.iter(|| (table.l2_squared_f32)(black_box(&a), black_box(&b)));
            });
            group.bench_with_input(BenchmarkId::new("dot_f32", &level), &(), |bench, ()| {
                bench.iter(|| (table.dot_f32)(black_box(&a), black_box(&b)));
            });
            group.bench_with_input(BenchmarkId::new("cosine_f32", &level), &(), |bench, ()| {
                bench.iter(|| (table.dot_and_norms_f32)(black_box(&a), black_box(&b)).cosine_distance());
            });
            group.bench_with_input(BenchmarkId::new("l1_f32", &level), &(), |bench, ()| {
                bench.iter(|| (table.l1_f32)(black_box(&a), black_box(&b)));
            });
            group.bench_with_input(BenchmarkId::new("l2_squared_f16", &level), &(), |bench, ()| {
                bench.iter(|| (table.l2_squared_f16)(black_box(&ha), black_box(&hb)));
            });
            group.bench_with_input(BenchmarkId::new("dot_f16", &level), &(), |bench, ()| {
                bench.iter(|| (table.dot_f16)(black_box(&ha), black_box(&hb)));
            });
        }
        group.finish();
    }
}

criterion_group!(benches, kernels);
criterion_main!(benches);
