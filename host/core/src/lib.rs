//! The native host for the `harness:jobs` tool plugin.
//!
//! The host owns everything with authority: processes ([`bash`]), the job registry
//! and the owner fence ([`registry`], [`owner`]), bounded output capture
//! ([`capture`]), in-process jobs ([`inproc`]), and the sandboxed
//! wasmtime embedding of the guest ([`plugin`]). The guest component decides
//! what the model reads of a call (schemas, checks, results, notices) in the
//! tool surface (profile A, B or C) each [`Mount`]'s config picks; the few
//! contract strings the host writes itself (a job's outcome detail, read
//! notes, its own log's warnings) are in one module, `words`, each with its
//! section of the contract. A producer of jobs stands on [`producer`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use host::{BashProducer, BashRequest, JobRegistry, Mount, Owner, PluginRuntime, SandboxLimits};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(PluginRuntime::new(SandboxLimits::default(), None)?);
//! let registry = JobRegistry::default();
//! let mount = Mount::new(runtime, registry.clone(), "{}").await?;
//! let bash = BashProducer::new(registry.clone(), Default::default())?;
//!
//! let alice = Owner::new("alice");
//! registry.agents().register(&alice);
//! let id = bash.start(Some(alice.clone()), BashRequest { command: "make test".into(), ..Default::default() })?;
//! let out = mount.invoke(Some(&alice), "job_output", &format!(r#"{{"job_id":"{id}","wait":true}}"#)).await;
//! println!("{}", out.text);
//! # Ok(()) }
//! ```

pub mod capture;
pub mod clock;
pub mod fs_trust;
pub mod limits;
pub mod owner;
pub mod plugin;
mod producers;
pub mod registry;
pub mod sandbox;
pub mod scope;
pub mod session;
pub mod sync;
mod words;

#[cfg(feature = "runners")]
pub use producers::runners;
pub use producers::{bash, containment, fence, inproc, seam as producer};
pub use tokio_util::sync::CancellationToken;

pub use bash::{BashConfig, BashProducer, BashRequest};
pub use owner::{
    Agent, AgentDirectory, AgentStatus, DeliveryError, Inbox, Lane, MessageSource, NoticeMessage,
    Owner,
};
pub use plugin::{Mount, PluginError, PluginRuntime, SandboxLimits, ToolOutcome};
pub use registry::{
    JobHooks, JobOutcome, JobRegistry, JobSnapshot, JobStart, JobStatus, OutcomeStatus,
    RegistryConfig, RegistryError, StartError,
};
pub use scope::ScopeKey;
