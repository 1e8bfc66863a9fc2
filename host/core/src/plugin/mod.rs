//! The wasmtime embedding: one engine, the component compiled once (and cached on
//! disk), and a fresh, limited store per call.
//!
//! Rooms: [`runtime`] (engine configuration, limits, the pre-instantiated
//! component), `cache` (the compiled artifact on disk), [`mount`] (one loaded copy
//! over a registry and its calls), `start` (the start tool, through the
//! guest), `types` (the public types, owned here, not generated), `delivery` (pushed completion notices),
//! `host_impl` (the WIT interfaces the host implements) and `convert` (the
//! conversions between registry and WIT types).
//!
//! [`PluginRuntime`] owns the engine, the epoch ticker and the pre-instantiated
//! component. [`Mount`] is one loaded copy of the plugin over a registry, with its
//! validated configuration and its controller attachment; every call runs in a new
//! store with a memory cap and a CPU budget, and the guest acts only through the
//! owner scope the host made for the caller of that call. A trap, a budget overrun
//! or a memory bomb fails that one call; the next call gets a new instance.

mod cache;
mod convert;
mod delivery;
mod host_impl;
pub mod mount;
pub mod runtime;
mod start;
mod ticker;
mod types;
pub mod wasi;

mod bindings {
    wasmtime::component::bindgen!({
        world: "tool-jobs",
        path: "wit",
        // Nothing blocks across the boundary (waits happen between guest calls),
        // so every call is a plain synchronous one: no fibers, no async exports.
        imports: { default: trappable },
        additional_derives: [PartialEq],
        with: { "harness:jobs/registry.owner-scope": super::host_impl::ScopeHandle },
    });
}

pub use types::{
    CompletionDelivery, ContentBlock, Extension, MountConfig, NoticeTransport, Profile,
    PromptSection, ToolAnnotations, ToolDefinition, UiCard,
};

pub use mount::{Mount, ToolOutcome};
pub use runtime::{PluginRuntime, SandboxLimits, inspect_component};
pub use start::{Preflight, StartMade, StartRequest};

/// The WIT package this host implements, as components name it in their
/// imports and exports (`harness:jobs/registry@0.9.0`, ...).
pub const WIT_PACKAGE: &str = "harness:jobs@0.9.0";

/// [`WIT_PACKAGE`]'s interface `name` (`registry`, `tools`, ...), as a
/// component's import or export names it.
pub fn wit_interface(name: &str) -> String {
    let (package, version) = WIT_PACKAGE.split_once('@').expect("a versioned package");
    format!("{package}/{name}@{version}")
}

/// The tool-jobs component this crate was built with.
pub const TOOL_JOBS_WASM: &[u8] = include_bytes!(env!("TOOL_JOBS_WASM"));

/// Any error, boxed: the wasmtime error (or I/O error) behind a [`PluginError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the plugin could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The engine or the component could not be set up.
    #[error("plugin setup failed: {message}")]
    Setup {
        /// What failed, as shown.
        message: String,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
    /// The plugin rejected its configuration (operator-facing text).
    #[error("{0}")]
    Config(String),
    /// The guest trapped, ran out of budget or memory.
    #[error("plugin failed: {message}")]
    Trap {
        /// The root cause (the trap code, or the budget message), as shown.
        message: String,
        /// The wasmtime error, with its whole chain.
        #[source]
        source: BoxError,
    },
}

fn setup(e: impl Into<BoxError>) -> PluginError {
    let source = e.into();
    PluginError::Setup {
        message: source.to_string(),
        source,
    }
}

fn trap(e: wasmtime::Error) -> PluginError {
    // `{:#}` keeps the root cause (the trap code, or our budget message).
    let text = format!("{e:#}");
    tracing::warn!("guest call failed: {text}");
    let root = e.root_cause().to_string();
    PluginError::Trap {
        message: if root.is_empty() { text } else { root },
        source: e.into(),
    }
}
