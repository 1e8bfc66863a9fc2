//! `jobs-host top`: a live view of this user's sessions and their jobs:
//! the daemon's durable sessions, and each plain `jobs-host mcp`'s own
//! session through its view socket (see `daemon::server::view`). A table that updates in place (id, session,
//! status with its exit code, age, CPU, memory, ports, label), the selected
//! job's output tail that follows, and keys to kill (confirmed), to filter,
//! and to open `logs -f`. It asks the daemon only what `ps` and `logs` ask,
//! so it never moves the model's read cursor and never marks anything read.

mod source;
mod stats;
mod view;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::daemon::Request;
use source::{ask, follow, refresh};
use stats::Stats;

/// How often the table and the tail are read again.
const REFRESH: Duration = Duration::from_secs(1);
/// The most lines of the selected job the tail pane asks for.
const TAIL_LINES: u32 = 200;

/// One job as `ps` reports it.
#[derive(Debug, Clone)]
struct Job {
    /// Where it was listed: the daemon (`None`), or a `jobs-host mcp`'s
    /// view socket. Its kill and its lines are asked there.
    source: Option<PathBuf>,
    id: String,
    session: String,
    status: String,
    detail: Option<String>,
    started_at: u64,
    finished_at: Option<u64>,
    pid: Option<i32>,
    ports: Vec<u64>,
    label: String,
}

impl Job {
    fn from_ps(job: &Value, source: Option<PathBuf>) -> Job {
        let text = |key: &str| job[key].as_str().unwrap_or_default().to_owned();
        Job {
            source,
            id: text("id"),
            session: text("session"),
            status: text("status"),
            detail: job["detail"].as_str().map(str::to_owned),
            started_at: job["started_at"].as_u64().unwrap_or_default(),
            finished_at: job["finished_at"].as_u64(),
            pid: job["pid"].as_i64().and_then(|p| i32::try_from(p).ok()),
            ports: job["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .collect(),
            label: text("label"),
        }
    }

    /// Whether the filter (a session key's or a status's part) keeps it.
    fn kept_by(&self, filter: &str) -> bool {
        let filter = filter.to_lowercase();
        filter.is_empty()
            || self.session.to_lowercase().contains(&filter)
            || self.status.to_lowercase().contains(&filter)
    }
}

/// What a key asks for.
enum Mode {
    /// Moving through the table.
    Browse,
    /// Typing a filter.
    Filter(String),
    /// Asking whether to kill this job (session, id).
    ConfirmKill(String, String),
}

/// Everything the view shows.
struct App {
    daemon: bool,
    now: u64,
    jobs: Vec<Job>,
    sessions: usize,
    /// The selected job (session, id): kept across refreshes by identity,
    /// not by row.
    selected: Option<(String, String)>,
    filter: String,
    mode: Mode,
    /// The selected job's last lines, and whether they are its stderr.
    tail: Vec<String>,
    stderr: bool,
    /// A line for the person: what a key did, or what failed.
    message: Option<String>,
    stats: Stats,
    before: Stats,
}

impl App {
    /// The jobs the filter keeps, in the daemon's order.
    fn visible(&self) -> Vec<&Job> {
        self.jobs
            .iter()
            .filter(|j| j.kept_by(&self.filter))
            .collect()
    }

    /// The selected job's row among the visible ones (the first when the
    /// selected one is gone).
    fn selected_row(&self) -> Option<usize> {
        let visible = self.visible();
        if visible.is_empty() {
            return None;
        }
        let at = self.selected.as_ref().and_then(|(session, id)| {
            visible
                .iter()
                .position(|j| &j.session == session && &j.id == id)
        });
        Some(at.unwrap_or(0))
    }

    fn selected_job(&self) -> Option<Job> {
        let row = self.selected_row()?;
        self.visible().get(row).map(|j| (*j).clone())
    }

    /// Moves the selection by `by` rows, within the visible ones.
    fn step(&mut self, by: isize) {
        let visible = self.visible();
        let Some(row) = self.selected_row() else {
            return;
        };
        let last = visible.len().saturating_sub(1);
        let row = row.saturating_add_signed(by).min(last);
        self.selected = visible.get(row).map(|j| (j.session.clone(), j.id.clone()));
    }
}

/// `jobs-host top`: runs until `q` (or a signal that ends a program:
/// TERM, HUP) and leaves the terminal as it was.
///
/// # Errors
///
/// Standard output is not a terminal, or the terminal cannot be set up.
pub async fn top() -> Result<u8> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "top needs a terminal; for a script, `jobs-host ps --all --json` lists the same jobs"
        );
    }
    // Registered for the life of the process: a ctrl-c meant for `logs -f`
    // (run in the foreground from here) does not end this view, and TERM
    // or HUP restore the terminal before the end.
    let mut signals = Signals {
        interrupt: signal(SignalKind::interrupt())?,
        terminate: signal(SignalKind::terminate())?,
        hangup: signal(SignalKind::hangup())?,
    };
    let mut app = App {
        daemon: false,
        now: 0,
        jobs: Vec::new(),
        sessions: 0,
        selected: None,
        filter: String::new(),
        mode: Mode::Browse,
        tail: Vec::new(),
        stderr: false,
        message: None,
        stats: Stats::default(),
        before: Stats::default(),
    };
    let (mut events, keys) = Keys::start();
    // Before the set-up: one that fails half-way is undone too.
    let _restore = Restore;
    let mut terminal = ratatui::try_init().context("cannot set the terminal up")?;
    let mut tick = tokio::time::interval(REFRESH);
    loop {
        tokio::select! {
            _ = tick.tick() => refresh(&mut app).await,
            Some(event) = events.recv() => {
                match on_event(&mut app, event).await {
                    Step::Stay => {}
                    Step::Quit => return Ok(0),
                    Step::Refresh => refresh(&mut app).await,
                    Step::Follow(job) => {
                        drop(terminal);
                        ratatui::restore();
                        keys.pause(true);
                        if let Some(code) = follow(&job, &mut signals).await {
                            return Ok(code);
                        }
                        keys.pause(false);
                        terminal = ratatui::try_init().context("cannot set the terminal up")?;
                        refresh(&mut app).await;
                    }
                }
            }
            _ = signals.interrupt.recv() => {}
            _ = signals.terminate.recv() => return Ok(TERMINATED),
            _ = signals.hangup.recv() => return Ok(HUNG_UP),
        }
        terminal.draw(|frame| view::draw(frame, &app))?;
    }
}

/// The signals `top` answers: a ctrl-c ends a follow, not the view; TERM
/// and HUP end it with the terminal restored.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

/// Exit codes as the signals would have given.
const TERMINATED: u8 = 128 + libc::SIGTERM as u8;
const HUNG_UP: u8 = 128 + libc::SIGHUP as u8;

/// Restores the terminal however `top` ends (an error, a signal, `q`).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What handling an event leads to.
enum Step {
    Stay,
    Quit,
    Refresh,
    Follow(Job),
}

async fn on_event(app: &mut App, event: Event) -> Step {
    let Event::Key(key) = event else {
        // A resize: the next draw lays the view out for the new size.
        return Step::Stay;
    };
    if key.kind != KeyEventKind::Press {
        return Step::Stay;
    }
    let mode = std::mem::replace(&mut app.mode, Mode::Browse);
    match mode {
        Mode::Browse => browse(app, key),
        Mode::Filter(mut text) => {
            match key.code {
                KeyCode::Enter => app.filter = text,
                KeyCode::Esc => {}
                KeyCode::Backspace => {
                    text.pop();
                    app.mode = Mode::Filter(text);
                }
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    text.push(c);
                    app.mode = Mode::Filter(text);
                }
                _ => app.mode = Mode::Filter(text),
            }
            Step::Stay
        }
        Mode::ConfirmKill(session, id) => {
            if matches!(key.code, KeyCode::Char('y' | 'Y')) {
                let source = app
                    .jobs
                    .iter()
                    .find(|j| j.session == session && j.id == id)
                    .and_then(|j| j.source.clone());
                let kill = Request::Kill {
                    id: id.clone(),
                    session: Some(session),
                };
                app.message = Some(match ask(source.as_ref(), kill).await {
                    Ok(Some((_, _, answer))) if answer["error"].is_string() => {
                        answer["error"].as_str().unwrap_or_default().to_owned()
                    }
                    Ok(Some((_, _, answer))) if answer["already_finished"] == true => {
                        format!("{id} had already finished")
                    }
                    Ok(Some(_)) => format!("killing {id}; its session will be told"),
                    Ok(None) => format!("{id}'s session is gone"),
                    Err(e) => format!("{e:#}"),
                });
                return Step::Refresh;
            }
            app.message = Some(format!("{id} left running"));
            Step::Stay
        }
    }
}

fn browse(app: &mut App, key: KeyEvent) -> Step {
    app.message = None;
    match key.code {
        KeyCode::Char('q') => return Step::Quit,
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Step::Quit,
        KeyCode::Up | KeyCode::Char('k') => app.step(-1),
        KeyCode::Down | KeyCode::Char('j') => app.step(1),
        KeyCode::PageUp => app.step(-10),
        KeyCode::PageDown => app.step(10),
        KeyCode::Home | KeyCode::Char('g') => app.step(isize::MIN / 2),
        KeyCode::End | KeyCode::Char('G') => app.step(isize::MAX / 2),
        KeyCode::Char('/' | 'f') => app.mode = Mode::Filter(app.filter.clone()),
        KeyCode::Esc => app.filter.clear(),
        KeyCode::Char('e') => {
            app.stderr = !app.stderr;
            return Step::Refresh;
        }
        KeyCode::Char('x' | 'K') => match app.selected_job() {
            Some(job) if job.status == "running" || job.status == "stopping" => {
                app.mode = Mode::ConfirmKill(job.session, job.id);
            }
            Some(job) => app.message = Some(format!("{} has ended", job.id)),
            None => {}
        },
        KeyCode::Char('l') | KeyCode::Enter => {
            if let Some(job) = app.selected_job() {
                return Step::Follow(job);
            }
        }
        _ => {}
    }
    Step::Stay
}

/// The terminal's events, read on a thread of their own (crossterm's reads
/// block); paused while `logs -f` has the terminal, so its keys stay its.
struct Keys {
    paused: Arc<AtomicBool>,
}

impl Keys {
    /// The reading thread, started: its events, and the switch that pauses it.
    fn start() -> (mpsc::UnboundedReceiver<Event>, Keys) {
        let (tx, rx) = mpsc::unbounded_channel();
        let paused = Arc::new(AtomicBool::new(false));
        let held = paused.clone();
        std::thread::spawn(move || {
            loop {
                if held.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                match event::poll(Duration::from_millis(100)) {
                    Ok(false) => {}
                    Ok(true) => match event::read() {
                        Ok(event) => {
                            if tx.send(event).is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                    Err(_) => return,
                }
                if tx.is_closed() {
                    return;
                }
            }
        });
        (rx, Keys { paused })
    }

    fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
    }
}
