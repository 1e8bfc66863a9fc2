//! A randomized check of profile C's pulled notices: interleaved starts,
//! settlements, status reads, waits, cancels, pulls through two mounts and run
//! closures across several owners, through the real component, against a model.
//!
//! Every settled job of an owner is announced exactly once, in an update pulled
//! for exactly that owner object (whatever was read, waited on or cancelled
//! before), never after its run was closed, and never through a mount whose
//! scope the owner is not in. Foreign ids stay indistinguishable from unknown
//! ones.

use std::collections::HashSet;

use crate::fixture::{JobControl, ScriptedJob, runtime};
use host::registry::OutcomeStatus;
use host::{JobRegistry, Mount, Owner, RegistryConfig, ScopeKey};
use proptest::prelude::*;
use serde_json::json;

const OWNERS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    Start { owner: Option<usize> },
    Settle { job: usize, status: usize },
    Status { caller: usize, job: usize },
    Wait { caller: usize, job: usize },
    Cancel { caller: usize, job: usize },
    Observe { job: usize },
    Pull { owner: usize, mount: usize },
    Close { owner: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::option::weighted(0.85, 0..OWNERS).prop_map(|owner| Op::Start { owner }),
        4 => (any::<usize>(), 0..3usize).prop_map(|(job, status)| Op::Settle { job, status }),
        2 => (0..OWNERS, any::<usize>()).prop_map(|(caller, job)| Op::Status { caller, job }),
        1 => (0..OWNERS, any::<usize>()).prop_map(|(caller, job)| Op::Wait { caller, job }),
        2 => (0..OWNERS, any::<usize>()).prop_map(|(caller, job)| Op::Cancel { caller, job }),
        1 => any::<usize>().prop_map(|job| Op::Observe { job }),
        4 => (0..OWNERS, 0..2usize).prop_map(|(owner, mount)| Op::Pull { owner, mount }),
        1 => (0..OWNERS).prop_map(|owner| Op::Close { owner }),
    ]
}

struct JobModel {
    id: String,
    owner: Option<Owner>,
    live: bool,
    removed: bool,
    control: JobControl,
}

struct World {
    registry: JobRegistry,
    /// A global mount and one in the preset's scope.
    mounts: [Mount; 2],
    preset: ScopeKey,
    owners: Vec<Owner>,
    jobs: Vec<JobModel>,
    announced: HashSet<String>,
}

impl World {
    async fn new() -> World {
        let registry = JobRegistry::new(
            RegistryConfig::with_max_concurrent_jobs_per_owner(1000).unwrap(),
            Default::default(),
        );
        let preset = registry.create_scope(None);
        let config = r#"{"profile":"c","maxWaitSeconds":1}"#;
        let mounts = [
            Mount::new(runtime(), registry.clone(), config)
                .await
                .unwrap(),
            Mount::scoped(runtime(), registry.clone(), Some(preset), config)
                .await
                .unwrap(),
        ];
        let mut world = World {
            registry,
            mounts,
            preset,
            owners: Vec::new(),
            jobs: Vec::new(),
            announced: HashSet::new(),
        };
        for slot in 0..OWNERS {
            let owner = world.new_owner(slot);
            world.owners.push(owner);
        }
        world
    }

    /// Slots 0 and 1 join the preset; 2 and 3 are served by the global mount only.
    fn new_owner(&self, slot: usize) -> Owner {
        let mut builder = Owner::builder(format!("session-{slot}"));
        if slot < 2 {
            builder = builder.scope(self.registry.create_scope(Some(self.preset)));
        }
        let owner = builder.build();
        self.registry.agents().register(&owner);
        owner
    }

    fn pick(&self, job: usize) -> Option<usize> {
        (!self.jobs.is_empty()).then(|| job % self.jobs.len())
    }

    fn owns(&self, slot: usize, job: usize) -> bool {
        self.jobs[job]
            .owner
            .as_ref()
            .is_some_and(|o| o.same_instance(&self.owners[slot]))
    }

    async fn call(&self, slot: usize, tool: &str, id: &str) -> host::ToolOutcome {
        let args = json!({"id": id, "timeout_seconds": 1}).to_string();
        self.mounts[0]
            .invoke(Some(&self.owners[slot]), tool, &args)
            .await
    }

    async fn apply(&mut self, op: &Op) {
        match *op {
            Op::Start { owner } => {
                let owner = owner.map(|slot| self.owners[slot].clone());
                let (id, control) = ScriptedJob::final_output(owner.as_ref())
                    .kind("query")
                    .start(&self.registry)
                    .unwrap();
                self.jobs.push(JobModel {
                    id,
                    owner,
                    live: true,
                    removed: false,
                    control,
                });
            }
            Op::Settle { job, status } => {
                let Some(i) = self.pick(job) else { return };
                if !self.jobs[i].live {
                    return;
                }
                let status = [
                    OutcomeStatus::Completed,
                    OutcomeStatus::Killed,
                    OutcomeStatus::Failed,
                ][status];
                let job = &mut self.jobs[i];
                job.control.settle(status, Some("why"), Some("rows")).await;
                job.live = false;
            }
            Op::Status { caller, job } | Op::Wait { caller, job } | Op::Cancel { caller, job } => {
                let Some(i) = self.pick(job) else { return };
                let tool = match op {
                    Op::Status { .. } => "job_status",
                    Op::Wait { .. } => "job_wait",
                    _ => "job_cancel",
                };
                let visible = self.jobs[i].owner.is_none()
                    || self.jobs[i]
                        .owner
                        .as_ref()
                        .is_some_and(|o| o.same_session(&self.owners[caller]));
                let cancels = self.jobs[i].control.cancels().len();
                let out = self.call(caller, tool, &self.jobs[i].id).await;
                if self.jobs[i].removed || !visible {
                    assert_eq!(out.text, "error: agentcore: job not found", "{op:?}");
                    assert_eq!(self.jobs[i].control.cancels().len(), cancels);
                } else {
                    assert!(!out.is_error, "{op:?}: {}", out.text);
                }
            }
            Op::Observe { job } => {
                // A read through another surface marks the job reported; profile C
                // announces it all the same.
                let Some(i) = self.pick(job) else { return };
                let _ = self
                    .registry
                    .read(&self.jobs[i].id, self.jobs[i].owner.as_ref());
            }
            Op::Pull { owner, mount } => self.pull(owner, mount).await,
            Op::Close { owner } => self.close(owner).await,
        }
    }

    async fn pull(&mut self, slot: usize, mount: usize) {
        let notice = self.mounts[mount]
            .pull_notice(&self.owners[slot])
            .await
            .unwrap();
        let served = mount == 0 || slot < 2;
        let due: HashSet<String> = (0..self.jobs.len())
            .filter(|&i| {
                served
                    && self.owns(slot, i)
                    && !self.jobs[i].live
                    && !self.jobs[i].removed
                    && !self.announced.contains(&self.jobs[i].id)
            })
            .map(|i| self.jobs[i].id.clone())
            .collect();
        let got: Vec<String> = match &notice {
            None => Vec::new(),
            Some(n) => {
                let lines: Vec<&str> = n.text.lines().collect();
                assert_eq!(lines[0], "Background job update:");
                lines
                    .iter()
                    .filter_map(|l| l.strip_prefix("- "))
                    .map(|l| l.split_once(" (").unwrap().0.to_owned())
                    .collect()
            }
        };
        let unique: HashSet<String> = got.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            got.len(),
            "announced twice in one update: {got:?}"
        );
        assert_eq!(unique, due, "owner {slot} through mount {mount}");
        for id in got {
            assert!(self.announced.insert(id.clone()), "{id} announced again");
        }
    }

    async fn close(&mut self, slot: usize) {
        let owner = self.owners[slot].clone();
        let mine: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| self.owns(slot, i))
            .collect();
        let live: Vec<JobControl> = mine
            .iter()
            .filter(|&&i| self.jobs[i].live)
            .map(|&i| self.jobs[i].control.clone())
            .collect();
        let producers = async {
            for control in &live {
                control
                    .settle_when_cancelled(OutcomeStatus::Killed, None)
                    .await;
            }
        };
        tokio::join!(self.registry.dispose_owner(&owner), producers);
        for i in mine {
            self.jobs[i].live = false;
            self.jobs[i].removed = true;
        }
        // The session's next run: same session id, a new owner object.
        self.registry.agents().unregister(&owner);
        self.owners[slot] = self.new_owner(slot);
    }
}

fn run(ops: &[Op]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut world = World::new().await;
        for op in ops {
            world.apply(op).await;
        }
        // Whatever settled and was never pulled is still due, exactly once.
        for slot in 0..OWNERS {
            world.pull(slot, 0).await;
            world.pull(slot, 0).await;
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn every_settled_job_is_announced_once_to_its_run(ops in proptest::collection::vec(op(), 40..120)) {
        run(&ops);
    }
}
