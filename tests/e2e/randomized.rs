//! A randomized check of delivery and isolation: thousands of interleaved starts,
//! reads, waits, kills, settlements, disposals and claims across several owners and
//! mounts, run through the real component against a model of what must happen.
//!
//! After every operation it checks that each owner's inbox holds exactly the
//! notices the model expects (one per unreported owned completion, to exactly its
//! owner object, through the lane the wake budget allows), that none arrives after
//! a kill, a terminal read, a wait that saw the end, or teardown, and that every
//! owner sees exactly its session's jobs plus the unowned ones. A wait whose
//! caller cancels it (before the job ends, or after the wait saw the end but
//! before the read) consumes nothing and leaves the job's notice due.

use std::collections::HashMap;

use crate::fixture::{JobControl, ScriptedJob, runtime, until_waiting};
use host::registry::OutcomeStatus;
use host::{AgentStatus, JobRegistry, Lane, MessageSource, Mount, Owner, RegistryConfig, ScopeKey};
use proptest::prelude::*;
use serde_json::json;

const OWNERS: usize = 4;
const MAX_WAKES: u64 = 2;
const ADMISSION: u64 = 10;

#[derive(Debug, Clone)]
enum Op {
    Start { owner: Option<usize>, stream: bool },
    Read { caller: Option<usize>, job: usize },
    Kill { caller: Option<usize>, job: usize },
    ShortWait { caller: Option<usize>, job: usize },
    SettleWhileWaiting { job: usize },
    CancelledWait { job: usize, after_end: bool },
    Settle { job: usize, status: usize },
    Dispose { owner: usize },
    Claim { owner: usize, user: bool },
    SetIdle { owner: usize, idle: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let who = proptest::option::weighted(0.8, 0..OWNERS);
    prop_oneof![
        4 => (who.clone(), any::<bool>()).prop_map(|(owner, stream)| Op::Start { owner, stream }),
        3 => (who.clone(), any::<usize>()).prop_map(|(caller, job)| Op::Read { caller, job }),
        2 => (who.clone(), any::<usize>()).prop_map(|(caller, job)| Op::Kill { caller, job }),
        1 => (who, any::<usize>()).prop_map(|(caller, job)| Op::ShortWait { caller, job }),
        1 => any::<usize>().prop_map(|job| Op::SettleWhileWaiting { job }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(job, after_end)| Op::CancelledWait { job, after_end }),
        4 => (any::<usize>(), 0..3usize).prop_map(|(job, status)| Op::Settle { job, status }),
        1 => (0..OWNERS).prop_map(|owner| Op::Dispose { owner }),
        2 => (0..OWNERS, any::<bool>()).prop_map(|(owner, user)| Op::Claim { owner, user }),
        2 => (0..OWNERS, any::<bool>()).prop_map(|(owner, idle)| Op::SetIdle { owner, idle }),
    ]
}

struct JobModel {
    id: String,
    owner: Option<Owner>,
    live: bool,
    reported: bool,
    removed: bool,
    control: JobControl,
}

struct OwnerModel {
    owner: Owner,
    idle: bool,
    spent: u64,
    expected: Vec<(Lane, String)>,
}

struct World {
    registry: JobRegistry,
    mounts: Vec<Mount>,
    global: bool,
    scopes: Vec<Option<ScopeKey>>,
    slots: Vec<OwnerModel>,
    retired: Vec<OwnerModel>,
    jobs: Vec<JobModel>,
}

impl World {
    async fn new(global: bool) -> World {
        let registry = JobRegistry::new(
            RegistryConfig::with_max_concurrent_jobs_per_owner(ADMISSION).unwrap(),
            Default::default(),
        );
        let config = format!(r#"{{"maxConsecutiveWakes":{MAX_WAKES}}}"#);
        let preset_a = registry.create_scope(None);
        let preset_b = registry.create_scope(None);
        let mut mounts = Vec::new();
        for scope in [Some(preset_a), Some(preset_b)] {
            mounts.push(
                Mount::scoped(runtime(), registry.clone(), scope, &config)
                    .await
                    .unwrap(),
            );
        }
        if global {
            mounts.push(
                Mount::new(runtime(), registry.clone(), &config)
                    .await
                    .unwrap(),
            );
        }
        // Slots 0 and 2 join preset A, slot 1 preset B, slot 3 none (global only).
        let scopes = vec![Some(preset_a), Some(preset_b), Some(preset_a), None];
        let mut world = World {
            registry,
            mounts,
            global,
            scopes,
            slots: Vec::new(),
            retired: Vec::new(),
            jobs: Vec::new(),
        };
        for slot in 0..OWNERS {
            let owner = world.new_owner(slot);
            world.slots.push(owner);
        }
        world
    }

    fn new_owner(&self, slot: usize) -> OwnerModel {
        let mut builder = Owner::builder(format!("session-{slot}"));
        if let Some(preset) = self.scopes[slot] {
            builder = builder.scope(self.registry.create_scope(Some(preset)));
        }
        let owner = builder.build();
        self.registry.agents().register(&owner);
        OwnerModel {
            owner,
            idle: false,
            spent: 0,
            expected: Vec::new(),
        }
    }

    fn caller(&self, slot: Option<usize>) -> Option<Owner> {
        slot.map(|s| self.slots[s].owner.clone())
    }

    fn pick(&self, job: usize) -> Option<usize> {
        (!self.jobs.is_empty()).then(|| job % self.jobs.len())
    }

    fn visible(&self, job: &JobModel, caller: Option<&Owner>) -> bool {
        !job.removed
            && match (&job.owner, caller) {
                (None, _) => true,
                (Some(o), Some(c)) => o.same_session(c),
                (Some(_), None) => false,
            }
    }

    fn model_for(&mut self, owner: &Owner) -> &mut OwnerModel {
        self.slots
            .iter_mut()
            .chain(self.retired.iter_mut())
            .find(|m| m.owner.same_instance(owner))
            .expect("every owner is modelled")
    }

    /// What settlement of an unreported owned job must deliver.
    fn expect_notice(&mut self, index: usize) {
        let job = &self.jobs[index];
        let (Some(owner), false) = (job.owner.clone(), job.reported) else {
            return;
        };
        let id = job.id.clone();
        self.jobs[index].reported = true;
        let model = self.model_for(&owner);
        let lane = if model.idle && model.spent < MAX_WAKES {
            model.spent += 1;
            Lane::Followup
        } else {
            Lane::Inject
        };
        model.expected.push((lane, id));
    }

    async fn apply(&mut self, op: &Op) {
        match *op {
            Op::Start { owner, stream } => self.start(owner, stream),
            Op::Read { caller, job } => self.read(caller, job, false).await,
            Op::ShortWait { caller, job } => self.read(caller, job, true).await,
            Op::Kill { caller, job } => self.kill(caller, job).await,
            Op::SettleWhileWaiting { job } => self.settle_while_waiting(job).await,
            Op::CancelledWait { job, after_end } => self.cancelled_wait(job, after_end).await,
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
                self.jobs[i].control.settle(status, None, Some("out")).await;
                self.jobs[i].live = false;
                self.expect_notice(i);
            }
            Op::Dispose { owner } => self.dispose(owner).await,
            Op::Claim { owner, user } => {
                let source = if user {
                    MessageSource::User
                } else {
                    MessageSource::Plugin
                };
                self.registry
                    .inbox_claimed(&self.slots[owner].owner, source);
                if user {
                    self.slots[owner].spent = 0;
                }
            }
            Op::SetIdle { owner, idle } => {
                let status = if idle {
                    AgentStatus::Idle
                } else {
                    AgentStatus::Running
                };
                self.slots[owner].owner.inbox().unwrap().set_status(status);
                self.slots[owner].idle = idle;
            }
        }
    }

    fn start(&mut self, slot: Option<usize>, stream: bool) {
        let owner = self.caller(slot);
        let job = if stream {
            ScriptedJob::stream(owner.as_ref())
        } else {
            ScriptedJob::final_output(owner.as_ref())
        };
        let served = match slot {
            None => self.global,
            Some(s) => self.global || self.scopes[s].is_some(),
        };
        let live = self
            .jobs
            .iter()
            .filter(|j| {
                j.live
                    && match (&j.owner, &owner) {
                        (None, None) => true,
                        (Some(a), Some(b)) => a.same_instance(b),
                        _ => false,
                    }
            })
            .count() as u64;
        match job.start(&self.registry) {
            Ok((id, control)) => {
                assert!(
                    served && live < ADMISSION,
                    "start {id} should have been refused"
                );
                self.jobs.push(JobModel {
                    id,
                    owner,
                    live: true,
                    reported: false,
                    removed: false,
                    control,
                });
            }
            Err(e) => {
                let expected = if !served {
                    host::StartError::NoController
                } else {
                    host::StartError::LimitReached(ADMISSION)
                };
                assert!(!served || live >= ADMISSION, "unexpected refusal: {e}");
                assert_eq!(e, expected);
            }
        }
    }

    async fn read(&mut self, slot: Option<usize>, job: usize, wait: bool) {
        let Some(i) = self.pick(job) else { return };
        let caller = self.caller(slot);
        let id = self.jobs[i].id.clone();
        let args = if wait {
            json!({"job_id": id, "wait": true, "timeout_ms": 5})
        } else {
            json!({"job_id": id})
        };
        let out = self.mounts[0]
            .invoke(caller.as_ref(), "job_output", &args.to_string())
            .await;
        if self.visible(&self.jobs[i], caller.as_ref()) {
            assert!(!out.is_error, "{}", out.text);
            if !self.jobs[i].live {
                self.jobs[i].reported = true;
            }
        } else {
            assert!(out.is_error);
            let expected = if self.jobs[i].removed {
                format!("Error: unknown job {id}")
            } else {
                format!("Error: job {id} belongs to another session")
            };
            assert_eq!(out.text, expected);
        }
    }

    async fn kill(&mut self, slot: Option<usize>, job: usize) {
        let Some(i) = self.pick(job) else { return };
        let caller = self.caller(slot);
        let id = self.jobs[i].id.clone();
        let out = self.mounts[0]
            .invoke(
                caller.as_ref(),
                "job_kill",
                &json!({"job_id": id}).to_string(),
            )
            .await;
        if self.visible(&self.jobs[i], caller.as_ref()) {
            assert!(!out.is_error, "{}", out.text);
            self.jobs[i].reported = true;
        } else {
            assert!(out.is_error, "{}", out.text);
        }
    }

    async fn settle_while_waiting(&mut self, job: usize) {
        let Some(i) = self.pick(job) else { return };
        if !self.jobs[i].live {
            return;
        }
        let owner = self.jobs[i].owner.clone();
        let id = self.jobs[i].id.clone();
        let args = json!({"job_id": id, "wait": true}).to_string();
        let call = self.mounts[0].invoke(owner.as_ref(), "job_output", &args);
        let registry = self.registry.clone();
        let control = self.jobs[i].control.clone();
        let settle = async {
            until_waiting(&registry, &id).await;
            control
                .settle(OutcomeStatus::Completed, None, Some("answer"))
                .await;
        };
        let (out, ()) = tokio::join!(call, settle);
        assert!(out.text.ends_with("[status: completed]"), "{}", out.text);
        self.jobs[i].live = false;
        self.jobs[i].reported = true;
    }

    /// A wait on a live job whose caller cancels it: before the job ends, or
    /// after the wait saw the end but before the call could read it (the call
    /// is not polled between the settlement and the cancel).
    async fn cancelled_wait(&mut self, job: usize, after_end: bool) {
        let Some(i) = self.pick(job) else { return };
        if !self.jobs[i].live {
            return;
        }
        let owner = self.jobs[i].owner.clone();
        let id = self.jobs[i].id.clone();
        let args = json!({"job_id": id, "wait": true}).to_string();
        let abort = tokio_util::sync::CancellationToken::new();
        let control = self.jobs[i].control.clone();
        {
            let mut call = std::pin::pin!(self.mounts[0].invoke_with_abort(
                owner.as_ref(),
                "job_output",
                &args,
                &abort
            ));
            tokio::select! {
                out = &mut call => panic!("the wait ended early: {}", out.text),
                () = until_waiting(&self.registry, &id) => {}
            }
            if after_end {
                control
                    .settle(OutcomeStatus::Completed, None, Some("answer"))
                    .await;
            }
            abort.cancel();
            let out = call.await;
            assert_eq!(out.text, "Error: wait aborted");
        }
        if !after_end {
            control
                .settle(OutcomeStatus::Completed, None, Some("answer"))
                .await;
        }
        self.jobs[i].live = false;
        // Nothing was shown: the notice is due, exactly as after a settlement
        // nobody saw.
        self.expect_notice(i);
    }

    async fn dispose(&mut self, slot: usize) {
        let owner = self.slots[slot].owner.clone();
        let mine: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| {
                self.jobs[i]
                    .owner
                    .as_ref()
                    .is_some_and(|o| o.same_instance(&owner))
            })
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
            let job = &mut self.jobs[i];
            job.live = false;
            job.reported = true;
            job.removed = true;
        }
        let replacement = self.new_owner(slot);
        let old = std::mem::replace(&mut self.slots[slot], replacement);
        self.retired.push(old);
    }

    async fn check(&self) {
        for mount in &self.mounts {
            mount.flush_notices().await;
        }
        let owner_of: HashMap<&str, &JobModel> =
            self.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
        for model in self.slots.iter().chain(&self.retired) {
            let got: Vec<(Lane, String)> = model
                .owner
                .inbox()
                .unwrap()
                .messages()
                .into_iter()
                .map(|(lane, m)| {
                    let id = m
                        .text
                        .split_whitespace()
                        .nth(2)
                        .unwrap_or_default()
                        .to_owned();
                    (lane, id)
                })
                .collect();
            assert_eq!(got, model.expected, "notices for {:?}", model.owner);
            for (_, id) in &got {
                let job = owner_of[id.as_str()];
                assert!(
                    job.owner
                        .as_ref()
                        .is_some_and(|o| o.same_instance(&model.owner))
                );
            }
        }
        for model in &self.slots {
            let seen: Vec<String> = self
                .registry
                .list(Some(&model.owner))
                .into_iter()
                .map(|j| j.id)
                .collect();
            let expected: Vec<String> = self
                .jobs
                .iter()
                .filter(|j| self.visible(j, Some(&model.owner)))
                .map(|j| j.id.clone())
                .collect();
            assert_eq!(seen, expected);
        }
    }
}

fn run(global: bool, ops: &[Op]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut world = World::new(global).await;
        for op in ops {
            world.apply(op).await;
            world.check().await;
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn notices_are_exact_and_owners_isolated(global in any::<bool>(), ops in proptest::collection::vec(op(), 60..160)) {
        run(global, &ops);
    }
}
