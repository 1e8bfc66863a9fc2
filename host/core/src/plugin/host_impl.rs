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
    pub(super) limits: CallLimits,
    /// The calling mount's registry; none between calls of a warm
    /// instance, so a kept store keeps no registry alive.
    pub(super) registry: Option<JobRegistry>,
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

/// The store's limits, noting how large the guest's memory grew: an
/// instance whose memory grew well past its start is not kept warm (its
/// pages would stay resident).
pub(super) struct CallLimits {
    pub(super) limits: StoreLimits,
    /// The largest memory size the guest asked for, in bytes.
    pub(super) memory_bytes: usize,
}

impl wasmtime::ResourceLimiter for CallLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.memory_bytes = self.memory_bytes.max(desired);
        self.limits.memory_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl CallState {
    /// The calling mount's registry (always there while a call runs).
    fn registry(&self) -> wasmtime::Result<&JobRegistry> {
        self.registry
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("a guest call outside a call"))
    }

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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
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
            .registry()?
            .ports(&job_id, caller.as_ref())
            .map(|ports| ports.into_iter().map(Into::into).collect())
            .map_err(wit::RegistryError::from))
    }

    fn resize(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
        size: wit::TerminalSize,
    ) -> wasmtime::Result<Result<(), wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        // A guest's size outside the bounds is refused here too.
        let range = crate::capture::TERMINAL_DIMENSIONS;
        if !range.contains(&size.rows) || !range.contains(&size.cols) {
            return Ok(Err(wit::RegistryError::ProducerFailed(format!(
                "invalid terminal size: {} rows × {} columns (each must be {} to {})",
                size.rows,
                size.cols,
                range.start(),
                range.end()
            ))));
        }
        let size = crate::capture::TerminalSize {
            rows: size.rows,
            cols: size.cols,
        };
        Ok(self
            .registry()?
            .resize(&job_id, caller.as_ref(), size)
            .map_err(wit::RegistryError::from))
    }

    fn screen(
        &mut self,
        scope: Resource<ScopeHandle>,
        job_id: String,
    ) -> wasmtime::Result<Result<wit::TerminalScreen, wit::RegistryError>> {
        let caller = self.caller(&scope)?;
        Ok(self
            .registry()?
            .screen(&job_id, caller.as_ref())
            .map(|(screen, job)| wit::TerminalScreen {
                size: wit::TerminalSize {
                    rows: screen.size.rows,
                    cols: screen.size.cols,
                },
                lines: screen.lines,
                cursor_row: screen.cursor_row,
                cursor_col: screen.cursor_col,
                alternate: screen.alternate,
                job: wit::JobSnapshot::from(&job),
            })
            .map_err(wit::RegistryError::from))
    }

    fn drop(&mut self, scope: Resource<ScopeHandle>) -> wasmtime::Result<()> {
        self.table.delete(scope)?;
        Ok(())
    }
}

impl bindings::harness::jobs::clock::Host for CallState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.registry()?.now_ms())
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
