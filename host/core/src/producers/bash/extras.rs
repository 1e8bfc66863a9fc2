//! The shell job's answers to the extension calls only a producer can serve:
//! input, signals and listening ports.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;

use super::process::ProcessControl;
use super::stdin::{InputChunk, InputState, MAX_PENDING_INPUT_BYTES};
use crate::registry::control::{ControlError, JobControl, JobSignal, ListeningPort};
use crate::sync::lock;

/// The shell job's answers to the extension calls only a producer can serve.
pub(super) struct BashControl {
    pub(super) process: Arc<ProcessControl>,
    pub(super) input: Mutex<InputState>,
    /// A durable job's directory (its monitor's files).
    pub(super) files: Option<std::path::PathBuf>,
    /// The job's terminal, if it runs on one.
    pub(super) terminal: Option<TerminalControl>,
}

/// What a resize of a job's terminal reaches: the terminal itself (the job
/// gets `SIGWINCH`) and the screen model its output is rendered on.
pub(super) struct TerminalControl {
    /// Let go of when the job ends: a finished job's record may be kept
    /// long, and pseudo-terminals are a machine-wide resource.
    pub(super) master: Mutex<Option<std::os::fd::OwnedFd>>,
    pub(super) capture: crate::capture::SharedCapture,
}

/// The signal a model's allowlisted one stands for.
pub(super) fn signal_of(signal: JobSignal) -> Signal {
    match signal {
        JobSignal::Int => Signal::SIGINT,
        JobSignal::Term => Signal::SIGTERM,
        JobSignal::Hup => Signal::SIGHUP,
        JobSignal::Kill => Signal::SIGKILL,
        JobSignal::Stop => Signal::SIGSTOP,
        JobSignal::Cont => Signal::SIGCONT,
    }
}

impl BashControl {
    /// The job has ended: its terminal is let go of.
    pub(super) fn ended(&self) {
        if let Some(terminal) = &self.terminal {
            lock(&terminal.master).take();
        }
    }
}

impl JobControl for BashControl {
    fn write_input(&self, data: &[u8], close: bool) -> Result<u64, ControlError> {
        let mut input = lock(&self.input);
        let writer = match &*input {
            InputState::None => return Err(ControlError::NoInput),
            InputState::Closed => return Err(ControlError::InputClosed),
            InputState::Open(writer) => writer,
        };
        if writer.broken.load(Ordering::SeqCst) || lock(&self.process.state).exited {
            *input = InputState::Closed;
            return Err(ControlError::InputClosed);
        }
        let waiting = writer.pending.load(Ordering::SeqCst);
        if waiting + data.len() as u64 > MAX_PENDING_INPUT_BYTES {
            return Err(ControlError::Failed(format!(
                "the job is not reading its input: {waiting} bytes are still waiting (at most {MAX_PENDING_INPUT_BYTES}); nothing was written"
            )));
        }
        if !data.is_empty() {
            writer
                .pending
                .fetch_add(data.len() as u64, Ordering::SeqCst);
            if writer.queue.send(InputChunk::Data(data.to_vec())).is_err() {
                *input = InputState::Closed;
                return Err(ControlError::InputClosed);
            }
        }
        if close {
            let _ = writer.queue.send(InputChunk::Close);
            // A terminal's end of input is a `^D` typed on it; the terminal
            // stays open for what comes next.
            if self.terminal.is_none() {
                *input = InputState::Closed;
            }
        }
        Ok(data.len() as u64)
    }

    fn signal(&self, signal: JobSignal) -> Result<(), ControlError> {
        let signal = signal_of(signal);
        if lock(&self.process.state).exited {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        }
        self.process.send(signal);
        Ok(())
    }

    fn leader_pid(&self) -> Option<i32> {
        lock(&self.process.container).leader()
    }

    fn files(&self) -> Option<std::path::PathBuf> {
        self.files.clone()
    }

    fn durable(&self) -> bool {
        self.files.is_some()
    }

    fn spawned(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.process.spawned.subscribe())
    }

    fn monitor(&self) -> Option<(i32, u64)> {
        self.files.as_ref()?;
        self.process.leader_start.get().copied()
    }

    fn ports(&self) -> Vec<ListeningPort> {
        let pids = lock(&self.process.container).pids();
        crate::producers::ports::listening_ports(&pids)
    }

    fn resize(&self, size: crate::capture::TerminalSize) -> Result<(), ControlError> {
        let Some(terminal) = &self.terminal else {
            return Err(ControlError::NoTerminal);
        };
        if lock(&self.process.state).exited {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        }
        let master = lock(&terminal.master);
        let Some(master) = master.as_ref() else {
            return Err(ControlError::Failed(
                "the job has already finished".to_owned(),
            ));
        };
        // The kernel's size (which tells the program) and the screen
        // model's change together: what it draws next lands on a screen of
        // the new size, and a failed resize changes neither.
        terminal
            .capture
            .resize_with(size, || {
                crate::producers::spawn::set_size(master, size.rows, size.cols)
            })
            .map(|_| ())
            .map_err(|e| ControlError::Failed(format!("cannot resize the job's terminal: {e}")))
    }
}
