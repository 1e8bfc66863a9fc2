//! One tool call through the component against the same guest logic compiled
//! natively and called in-process, plus the cost of a fresh instance per call and
//! of a cold start with and without the compiled-artifact cache.
//!
//! Run with `cargo bench --bench tool_call`. Read the results as ratios of the
//! pairs measured side by side in one run; absolute times vary with the machine.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use guest_tool_jobs::config::Config;
use guest_tool_jobs::model::{self, JobsView};
use host::registry::{JobHooks, JobOutcome, JobRegistry, JobStart, OutcomeStatus};
use host::{
    AgentDirectory, JobSnapshot, JobStatus, Mount, Owner, PluginRuntime, RegistryConfig,
    SandboxLimits,
};

/// The host registry seen through the guest's own trait, for the native baseline.
struct NativeView<'a> {
    registry: &'a JobRegistry,
    caller: Option<&'a Owner>,
}

fn to_model(job: JobSnapshot) -> model::JobSnapshot {
    model::JobSnapshot {
        id: job.id,
        kind: job.kind,
        label: job.label,
        status: match job.status {
            JobStatus::Running => model::JobStatus::Running,
            JobStatus::Stopping => model::JobStatus::Stopping,
            JobStatus::Completed => model::JobStatus::Completed,
            JobStatus::Killed => model::JobStatus::Killed,
            JobStatus::Failed => model::JobStatus::Failed,
        },
        detail: job.detail,
        started_at: job.started_at,
        finished_at: job.finished_at,
        output_limit_bytes: job.output_limit_bytes,
        reported: job.reported,
        // The bench's jobs run unfenced.
        sandbox: None,
        placement: None,
    }
}

fn to_model_error(e: host::RegistryError) -> model::RegistryError {
    match e {
        host::RegistryError::UnknownJob(id) => model::RegistryError::UnknownJob(id),
        host::RegistryError::ForeignJob(id) => model::RegistryError::ForeignJob(id),
        host::RegistryError::InvalidTimeout(v) => model::RegistryError::InvalidTimeout(v as f64),
        host::RegistryError::WaitAborted => model::RegistryError::WaitAborted,
        host::RegistryError::ProducerFailed(m) => model::RegistryError::ProducerFailed(m),
        host::RegistryError::InvalidPattern(m) => model::RegistryError::InvalidPattern(m),
        host::RegistryError::NoInput => model::RegistryError::NoInput,
        host::RegistryError::InputClosed => model::RegistryError::InputClosed,
        host::RegistryError::Unsupported(m) => model::RegistryError::Unsupported(m),
        host::RegistryError::NoTerminal => model::RegistryError::NoTerminal,
    }
}

impl JobsView for NativeView<'_> {
    fn list_jobs(&self) -> Vec<model::JobSnapshot> {
        self.registry
            .list(self.caller)
            .into_iter()
            .map(to_model)
            .collect()
    }

    fn get(&self, id: &str) -> Result<model::JobSnapshot, model::RegistryError> {
        self.registry
            .get(id, self.caller)
            .map(to_model)
            .map_err(to_model_error)
    }

    fn read(&self, id: &str) -> Result<(String, model::JobSnapshot), model::RegistryError> {
        self.registry
            .read(id, self.caller)
            .map(|(t, j)| (t, to_model(j)))
            .map_err(to_model_error)
    }

    fn kill(
        &self,
        id: &str,
        reason: Option<&str>,
    ) -> Result<model::KillOutcome, model::RegistryError> {
        self.registry
            .kill(id, self.caller, reason)
            .map(|o| match o {
                host::registry::KillOutcome::Requested => model::KillOutcome::Requested,
                host::registry::KillOutcome::AlreadyFinished => model::KillOutcome::AlreadyFinished,
            })
            .map_err(to_model_error)
    }

    fn output(
        &self,
        id: &str,
        window: model::ExcerptWindow,
    ) -> Result<model::Excerpt, model::RegistryError> {
        let window = host::capture::ExcerptWindow {
            whole_up_to: window.whole_up_to,
            head_bytes: window.head_bytes,
            tail_bytes: window.tail_bytes,
        };
        self.registry
            .output(id, self.caller, window)
            .map(|(e, job)| model::Excerpt {
                head: e.head,
                tail: e.tail,
                omitted_bytes: e.omitted_bytes,
                job: to_model(job),
            })
            .map_err(to_model_error)
    }

    fn now_ms(&self) -> u64 {
        host::registry::now_ms()
    }

    fn log_info(&self, _message: &str) {}
}

/// A job whose every read returns the same 20 lines, and that never ends.
fn chatty_job(registry: &JobRegistry, owner: &Owner) -> String {
    registry
        .start(
            JobStart {
                kind: "bash".into(),
                label: "make -j2".into(),
                output_limit_bytes: None,
                owner: Some(owner.clone()),
                sandbox: None,
            },
            || {
                Ok(JobHooks {
                    capture: None,
                    control: None,
                    placement: None,
                    cancel: Box::new(|_| Ok(())),
                    read_output: Some(Box::new(|| Ok("compiling crate ok\n".repeat(20)))),
                    output_excerpt: Some(Box::new(|window| {
                        Ok(host::capture::text_excerpt(
                            &"compiling crate ok\n".repeat(20),
                            window,
                        ))
                    })),
                    done: Box::pin(std::future::pending()),
                })
            },
        )
        .unwrap()
}

/// A final-output job that is already done with `output`.
fn finished_job(registry: &JobRegistry, owner: &Owner, output: String) -> String {
    registry
        .start(
            JobStart {
                kind: "export".into(),
                label: "export rows".into(),
                output_limit_bytes: None,
                owner: Some(owner.clone()),
                sandbox: None,
            },
            move || {
                Ok(JobHooks {
                    capture: None,
                    control: None,
                    placement: None,
                    cancel: Box::new(|_| Ok(())),
                    read_output: None,
                    output_excerpt: None,
                    done: Box::pin(async move {
                        Ok(JobOutcome {
                            status: OutcomeStatus::Completed,
                            detail: None,
                            output: Some(output),
                        })
                    }),
                })
            },
        )
        .unwrap()
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cache = std::env::temp_dir().join("jobs-bench-component-cache");
    let runtime = Arc::new(PluginRuntime::new(SandboxLimits::default(), Some(&cache)).unwrap());
    let registry = JobRegistry::new(
        RegistryConfig::with_max_concurrent_jobs_per_owner(1000).unwrap(),
        AgentDirectory::default(),
    );
    let mount = rt
        .block_on(Mount::new(runtime.clone(), registry.clone(), "{}"))
        .unwrap();
    let owner = Owner::new("bench");
    registry.agents().register(&owner);
    let _guard = rt.enter();
    let output_id = chatty_job(&registry, &owner);
    for _ in 1..100 {
        chatty_job(&registry, &owner);
    }
    let config = Config::default();
    let output_args = format!(r#"{{"job_id":"{output_id}"}}"#);

    let mut group = c.benchmark_group("job_list_100");
    group.bench_function("component", |b| {
        b.to_async(&rt)
            .iter(|| mount.invoke(Some(&owner), "job_list", "{}"))
    });
    group.bench_function("native", |b| {
        b.to_async(&rt).iter(|| async {
            let view = NativeView {
                registry: &registry,
                caller: Some(&owner),
            };
            guest_tool_jobs::surface::invoke(&view, &config, "job_list", "{}", None)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("job_output");
    group.bench_function("component", |b| {
        b.to_async(&rt)
            .iter(|| mount.invoke(Some(&owner), "job_output", &output_args))
    });
    group.bench_function("native", |b| {
        b.to_async(&rt).iter(|| async {
            let view = NativeView {
                registry: &registry,
                caller: Some(&owner),
            };
            guest_tool_jobs::surface::invoke(&view, &config, "job_output", &output_args, None)
        })
    });
    group.finish();

    // Profile C reads a finished job's whole result: 100 kB, cut to 24 KiB.
    let c_mount = rt
        .block_on(Mount::new(
            runtime.clone(),
            registry.clone(),
            r#"{"profile":"c"}"#,
        ))
        .unwrap();
    let c_config = guest_tool_jobs::config::parse_config(r#"{"profile":"c"}"#).unwrap();
    let export_id = finished_job(&registry, &owner, "row,".repeat(25_000));
    rt.block_on(registry.settled(&export_id));
    let status_args = format!(r#"{{"id":"{export_id}"}}"#);
    let mut group = c.benchmark_group("job_status_100k");
    group.bench_function("component", |b| {
        b.to_async(&rt)
            .iter(|| c_mount.invoke(Some(&owner), "job_status", &status_args))
    });
    group.bench_function("native", |b| {
        b.to_async(&rt).iter(|| async {
            let view = NativeView {
                registry: &registry,
                caller: Some(&owner),
            };
            guest_tool_jobs::surface::invoke(&view, &c_config, "job_status", &status_args, None)
        })
    });
    group.finish();

    // What keeping pooled pages resident between calls buys: each size zeroes
    // that much in place per call; above the guest's footprint the rest is
    // returned to the kernel and faulted in again.
    let mut group = c.benchmark_group("keep_resident");
    for kib in [0usize, 64, 512, 2048] {
        let limits = SandboxLimits {
            keep_resident_bytes: kib << 10,
            ..SandboxLimits::default()
        };
        let sized = Arc::new(PluginRuntime::new(limits, Some(&cache)).unwrap());
        let sized_mount = rt
            .block_on(Mount::new(sized, registry.clone(), "{}"))
            .unwrap();
        group.bench_function(format!("job_output_{kib}k"), |b| {
            b.to_async(&rt)
                .iter(|| sized_mount.invoke(Some(&owner), "job_output", &output_args))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("instance");
    group.bench_function("fresh_per_call", |b| {
        b.to_async(&rt).iter(|| runtime.fresh_instance(&registry))
    });
    group.finish();

    let mut group = c.benchmark_group("cold_start");
    group.sample_size(10);
    group.bench_function("cached", |b| {
        b.iter(|| PluginRuntime::new(SandboxLimits::default(), Some(&cache)).unwrap())
    });
    group.bench_function("compile", |b| {
        b.iter(|| PluginRuntime::new(SandboxLimits::default(), None).unwrap())
    });
    group.finish();
}

criterion_group!(tool_call, benches);
criterion_main!(tool_call);
