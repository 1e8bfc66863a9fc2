//! The WIT interfaces the host implements for the guest: the owner-scoped
//! registry, the clock and the log.

use wasmtime::StoreLimits;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings;
use super::bindings::harness::jobs::types as wit;
use crate::capture::ExcerptWindow;
use crate::owner::Owner;
use crate::registry::JobRegistry;

/// The caller a scope speaks for: the one capability the guest receives per call.
pub struct ScopeHandle {
    pub(super) caller: Option<Owner>,
}

/// Per-call store data.
pub(super) struct CallState {
    pub(super) table: ResourceTable,
    pub(super) limits: StoreLimits,
    pub(super) registry: JobRegistry,
    pub(super) ticks_used: u64,
    /// Made on first use: a guest that imports no WASI never pays for it.
    pub(super) wasi: Option<WasiCtx>,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(super::wasi::deny_by_default),
            table: &mut self.table,
        }
    }
}

impl CallState {
    fn caller(&self, scope: &Resource<ScopeHandle>) -> wasmtime::Result<Option<Owner>> {
        Ok(self.table.get(scope)?.caller.clone())
    }
}

impl bindings::harness::jobs::types::Host for CallState {}

impl bindings::harness::jobs::registry::Host for CallState {}

impl bindings::harness::jobs::registry::HostOwnerScope for CallState {
    fn list_jobs(
        &mut self,
        scope: Resource<ScopeHandle>,
    ) -> wasmtime::Result<Vec<wit::JobSnapshot>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .list(caller.as_ref())
            .iter()
            .map(wit::JobSnapshot::from)
            .collect())
    }

    fn get(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<wit::JobSnapshot, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .get(&job_id, caller.as_ref())
            .map(|j| wit::JobSnapshot::from(&j))
            .map_err(wit::RegistryError::from))
    }

    fn read(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<wit::ReadResult, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .read(&job_id, caller.as_ref())
            .map(|(text, job)| wit::ReadResult {
                text,
                job: wit::JobSnapshot::from(&job),
            })
            .map_err(wit::RegistryError::from))
    }

    fn output(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        window: wit::ExcerptWindow,
    ) -> wasmtime::Result<Result<wit::OutputExcerpt, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        let window = ExcerptWindow::from(window);
        Ok(self
            .registry
            .output(&job_id, caller.as_ref(), window)
            .map(|(excerpt, job)| wit::OutputExcerpt {
                head: excerpt.head,
                tail: excerpt.tail,
                omitted_bytes: excerpt.omitted_bytes,
                job: wit::JobSnapshot::from(&job),
            })
            .map_err(wit::RegistryError::from))
    }

    fn kill(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        reason: Option<String>,
    ) -> wasmtime::Result<Result<wit::KillOutcome, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .kill(&job_id, caller.as_ref(), reason.as_deref())
            .map(wit::KillOutcome::from)
            .map_err(wit::RegistryError::from))
    }

    fn write_input(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        data: String,
        close: bool,
    ) -> wasmtime::Result<Result<u64, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .write_input(&job_id, caller.as_ref(), data.as_bytes(), close)
            .map_err(wit::RegistryError::from))
    }

    fn signal(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        signal: wit::JobSignal,
    ) -> wasmtime::Result<Result<(), wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .signal(&job_id, caller.as_ref(), signal.into())
            .map_err(wit::RegistryError::from))
    }

    fn lines(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        query: wit::LineQuery,
    ) -> wasmtime::Result<Result<wit::LinePage, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .lines(&job_id, caller.as_ref(), &query.into())
            .map(|(page, job)| wit::LinePage {
                lines: page.lines.into_iter().map(Into::into).collect(),
                hits: page.hits,
                total_matches: page.total_matches,
                extents: page.extents.into_iter().map(Into::into).collect(),
                stopped: page.stopped.map(|(stream, line)| wit::SearchStop {
                    stream: stream.into(),
                    line,
                }),
                job: wit::JobSnapshot::from(&job),
            })
            .map_err(wit::RegistryError::from))
    }

    fn ports(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<Vec<wit::ListeningPort>, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry
            .ports(&job_id, caller.as_ref())
            .map(|ports| ports.into_iter().map(Into::into).collect())
            .map_err(wit::RegistryError::from))
    }

    fn drop(&mut self, scope: Resource<ScopeHandle>) -> wasmtime::Result<()> {
        self.table.delete(scope)?;
        Ok(())
    }
}

impl bindings::harness::jobs::clock::Host for CallState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.registry.now_ms())
    }
}

impl bindings::harness::jobs::diag::Host for CallState {
    fn log(
        &mut self,
        level: bindings::harness::jobs::diag::Level,
        message: String,
    ) -> wasmtime::Result<()> {
        use bindings::harness::jobs::diag::Level;
        match level {
            Level::Debug => tracing::debug!(target: "tool_jobs_guest", "{message}"),
            Level::Info => tracing::info!(target: "tool_jobs_guest", "{message}"),
            Level::Warn => tracing::warn!(target: "tool_jobs_guest", "{message}"),
            Level::Error => tracing::error!(target: "tool_jobs_guest", "{message}"),
        }
        Ok(())
    }
}
