//! Pushed completion notices: for each settlement a mount hears, ask the guest
//! what to deliver and hand it to the owner's agent.

use std::sync::Arc;

use super::bindings::exports::harness::jobs::notices as wit_notices;
use super::bindings::exports::harness::jobs::tools::{Config as PluginConfig, DisposedOwner};
use super::bindings::harness::jobs::types as wit;
use super::runtime::PluginRuntime;
use super::trap;
use crate::owner::{self, Lane, NoticeMessage, Owner};
use crate::registry::{self, JobRegistry};

/// Work for a mount's notice task, done in order.
pub(super) enum NoticeWork {
    // Boxed: a snapshot is large beside a flush.
    Settled(Box<registry::JobSnapshot>, Option<Owner>),
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// A mount's notice task: asks the guest what to deliver for each settlement, in
/// order, and acts on the answer. Ends when the mount is dropped.
pub(super) async fn deliver_notices(
    runtime: Arc<PluginRuntime>,
    registry: JobRegistry,
    config: PluginConfig,
    mut work: tokio::sync::mpsc::UnboundedReceiver<NoticeWork>,
) {
    while let Some(item) = work.recv().await {
        match item {
            NoticeWork::Flush(done) => {
                let _ = done.send(());
            }
            NoticeWork::Settled(job, owner) => {
                if let Err(e) = deliver_one(&runtime, &registry, &config, &job, owner).await {
                    tracing::warn!("{}", crate::words::done_listener_failed(&job.id, &e));
                }
            }
        }
    }
}

async fn deliver_one(
    runtime: &PluginRuntime,
    registry: &JobRegistry,
    config: &PluginConfig,
    job: &registry::JobSnapshot,
    owner: Option<Owner>,
) -> Result<(), String> {
    // An unowned job has nobody to deliver to; the guest would say the same.
    let Some(owner) = owner else {
        return Ok(());
    };
    // Decide on the record as it is now: a read since settlement may already have
    // shown the outcome. A record torn down since has nobody left to tell.
    let Some(current) = registry.inspect(&job.id) else {
        return Ok(());
    };
    // The contract's `deliver` answers nothing for a job whose end its owner
    // has read: decided here without a guest call (most jobs read with a
    // wait end that way).
    if current.reported {
        return Ok(());
    }
    let agent = owner.agent().clone();
    let status = contain(|| agent.status())?;
    let state = wit_notices::OwnerState {
        status: match status {
            owner::AgentStatus::Idle => wit_notices::AgentStatus::Idle,
            owner::AgentStatus::Running => wit_notices::AgentStatus::Running,
        },
        wakes_spent: registry.wakes_spent(&owner),
    };
    let snapshot = wit::JobSnapshot::from(&current);
    // The pool slot goes back before the owner's agent is called.
    let decision = runtime
        .call(registry, |jobs, store| {
            jobs.harness_jobs_notices()
                .call_deliver(store, config, &snapshot, Some(state))
                .map_err(trap)
        })
        .await
        .map_err(|e| e.to_string())?;
    let Some(delivery) = decision else {
        return Ok(());
    };
    // Claiming marks the job reported under the registry's lock: a read racing
    // this delivery either came first (no notice) or comes after the notice, and
    // no second mount can announce the same job again.
    if !registry.claim_notice(&job.id) {
        return Ok(());
    }
    let message = NoticeMessage {
        text: delivery.notice.text,
        summary: delivery.notice.summary,
        plugin: delivery.notice.plugin,
        form: delivery.notice.form,
    };
    let lane = match delivery.lane {
        wit_notices::Lane::Inject => Lane::Inject,
        wit_notices::Lane::Followup => Lane::Followup,
    };
    if lane == Lane::Followup {
        registry.record_wake(&owner);
    }
    match contain(|| match lane {
        Lane::Inject => agent.inject(message),
        Lane::Followup => agent.followup(message),
    })? {
        Ok(()) => Ok(()),
        // An owner torn down while its notice was on the way is a harmless
        // race, not a failure, where the config says so (profile B).
        Err(owner::DeliveryError::Disposed(_))
            if config.disposed_owner == DisposedOwner::Ignore =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Runs harness code, turning a panic into an error.
fn contain<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|panic| registry::panic_message(&*panic))
}
