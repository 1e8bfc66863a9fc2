//! Registering and settling many in-process jobs: the registry's cost per job
//! should stay flat as the number of jobs grows (linear in total).
//!
//! `cargo bench --bench registry_scale` prints, for each size, the time to
//! register and settle every job, and the time per job. Plain wall-clock
//! figures from one process; compare the per-job column across sizes.

use std::time::Instant;

use host::inproc::{InProcessJob, start_final};
use host::{AgentDirectory, JobRegistry, RegistryConfig};

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!("{:>8} {:>10} {:>12}", "jobs", "total ms", "us per job");
    for n in [10_000u64, 20_000, 40_000, 80_000, 160_000] {
        let elapsed = runtime.block_on(async {
            let registry = JobRegistry::new(
                RegistryConfig::with_max_concurrent_jobs_per_owner(n).expect("a valid limit"),
                AgentDirectory::default(),
            );
            let _controller = registry.attach_controller();
            let start = Instant::now();
            let mut last = String::new();
            for i in 0..n {
                let job = InProcessJob::new("crawl", format!("page {i}"));
                last = start_final(&registry, job, |_ctx| async { Ok("ok".to_owned()) })
                    .expect("admitted");
            }
            // Settlement runs on spawned tasks; the last one settles last.
            registry.settled(&last).await;
            let elapsed = start.elapsed();
            assert!(
                registry
                    .list(None)
                    .iter()
                    .all(|job| job.status.is_terminal())
            );
            elapsed
        });
        println!(
            "{n:>8} {:>10.0} {:>12.2}",
            elapsed.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e6 / n as f64
        );
    }
}
