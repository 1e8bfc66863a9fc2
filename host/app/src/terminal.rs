//! The terminal of the interactive front ends (the console, `shell
//! --session`, `logs -f`): the line editor on a thread of its own, the
//! terminal's hang-up, and its modes put back on every exit.
//!
//! Why a thread and a watch of our own. The editor (reedline) blocks in
//! `read_line` until a key comes, so it runs on a thread: the async side
//! stays free to see signals while the prompt waits. And reedline reads keys
//! through crossterm, which retries a read that failed for good (end of input,
//! or `EIO` from a terminal whose other side closed) in a loop that never
//! returns (crossterm 0.29, `event/source/unix/mio.rs`, `try_read`). So the
//! hang-up is seen here, by polling the terminal for `POLLHUP`, and the
//! editor's thread is then given an empty pipe as its standard input: its
//! next read sleeps there until the process exits, instead of spinning.

use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, SetArg, Termios};
use reedline::{
    DefaultPrompt, DefaultPromptSegment, ExternalPrinter, FileBackedHistory, Reedline, Signal,
};

/// What one read of a line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A line, entered.
    Line(String),
    /// Ctrl-c at the prompt: the line was cleared.
    Interrupt,
    /// Ctrl-d on an empty line.
    End,
    /// The terminal hung up, or can no longer be read or written.
    HungUp,
}

/// What the console does next: run a line, or end, as the signal of this
/// number would (`None`: an ordinary end, as `exit`).
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A line to run.
    Line(String),
    /// The console ends.
    End(Option<i32>),
}

/// The terminal's modes from before the first editor started; [`restore`]
/// puts them back. A process has one terminal, and the exit paths that
/// end it with `std::process::exit` (a signal) run no destructor, so the
/// modes are kept here rather than in a guard.
static MODES: Mutex<Option<Termios>> = Mutex::new(None);

/// Whether the editor is showing its prompt (so an exit from there ends the
/// line first).
static AT_PROMPT: AtomicBool = AtomicBool::new(false);

/// The console's line editor, on a thread of its own, reading standard
/// input (a terminal) one line at a time when asked.
pub struct LineReader {
    ask: std::sync::mpsc::Sender<()>,
    reads: tokio::sync::mpsc::UnboundedReceiver<Read>,
    hung_up: tokio::sync::watch::Receiver<bool>,
}

impl LineReader {
    /// Starts the editor, with its history and prompt. What is sent through
    /// `printer` is shown above the prompt as it arrives. The terminal's
    /// hang-up is watched from now on: a read pending then, or any later one,
    /// gives [`Read::HungUp`].
    ///
    /// # Errors
    ///
    /// A thread that cannot be started.
    pub fn start(printer: ExternalPrinter<String>) -> io::Result<LineReader> {
        if let Ok(modes) = termios::tcgetattr(io::stdin()) {
            host::sync::lock(&MODES).get_or_insert(modes);
        }
        let (editor, prompt) = line_editor(printer);
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (read, reads) = tokio::sync::mpsc::unbounded_channel();
        let (hang_up, hung_up) = tokio::sync::watch::channel(false);
        std::thread::Builder::new()
            .name("jobs-console".into())
            .spawn(move || edit(editor, prompt, asked, read))?;
        std::thread::Builder::new()
            .name("jobs-hang-up".into())
            .spawn(move || {
                wait_for_hang_up(io::stdin().as_fd());
                park_standard_input();
                hang_up.send_replace(true);
            })?;
        Ok(LineReader {
            ask,
            reads,
            hung_up,
        })
    }

    /// The next line (or what ended it).
    pub async fn read(&mut self) -> Read {
        if *self.hung_up.borrow() || self.ask.send(()).is_err() {
            return Read::HungUp;
        }
        let mut hung_up = self.hung_up.clone();
        tokio::select! {
            read = self.reads.recv() => read.unwrap_or(Read::HungUp),
            Ok(_) = hung_up.wait_for(|gone| *gone) => Read::HungUp,
        }
    }

    /// The console's next step: a line; or its end, on ctrl-d (an ordinary
    /// end), on a second ctrl-c in a row (as `SIGINT` would: the first
    /// only clears the line, and says how to leave), or on a hang-up (as
    /// `SIGHUP` would).
    pub async fn next(&mut self) -> Next {
        let mut interrupted = false;
        loop {
            match self.read().await {
                Read::Line(line) => return Next::Line(line),
                Read::Interrupt if interrupted => return Next::End(Some(libc::SIGINT)),
                Read::Interrupt => {
                    interrupted = true;
                    say("(ctrl-c again, ctrl-d or `exit` leaves the console)");
                }
                Read::End => return Next::End(None),
                Read::HungUp => return Next::End(Some(libc::SIGHUP)),
            }
        }
    }

    /// Resolves once the terminal has hung up (at once if it has): for what
    /// the console runs between two reads.
    pub async fn hung_up(&self) {
        let mut hung_up = self.hung_up.clone();
        if hung_up.wait_for(|gone| *gone).await.is_err() {
            // The watch's thread could not run: nothing will tell.
            std::future::pending::<()>().await;
        }
    }
}

/// The editor's thread: a line per request, until nobody asks.
fn edit(
    mut editor: Reedline,
    prompt: DefaultPrompt,
    asked: std::sync::mpsc::Receiver<()>,
    reads: tokio::sync::mpsc::UnboundedSender<Read>,
) {
    while asked.recv().is_ok() {
        AT_PROMPT.store(true, Ordering::Relaxed);
        let signal = editor.read_line(&prompt);
        AT_PROMPT.store(false, Ordering::Relaxed);
        let read = match signal {
            Ok(Signal::Success(line)) => Read::Line(line),
            Ok(Signal::CtrlC) => Read::Interrupt,
            Ok(Signal::CtrlD) => Read::End,
            // Nothing else is configured here (no host commands, no break
            // flag): a line given up.
            Ok(_) => Read::Interrupt,
            // A terminal that cannot be read or written any more.
            Err(_) => Read::HungUp,
        };
        if reads.send(read).is_err() {
            return;
        }
    }
}

/// The editor with its history (in the cache directory) and its prompt.
fn line_editor(printer: ExternalPrinter<String>) -> (Reedline, DefaultPrompt) {
    let history = crate::wiring::default_cache_dir().map(|d| d.join("shell-history"));
    let mut editor = Reedline::create().with_external_printer(printer);
    if let Some(path) = history {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")));
        if let Ok(h) = FileBackedHistory::with_file(1000, path) {
            editor = editor.with_history(Box::new(h));
        }
    }
    let prompt = DefaultPrompt::new(
        DefaultPromptSegment::Basic("jobs".into()),
        DefaultPromptSegment::Empty,
    );
    (editor, prompt)
}

/// Returns once `fd` (a terminal) has hung up: its other side closed, or
/// the session's terminal taken away. Asking `poll` for no event at all
/// still reports `POLLHUP` and `POLLERR`, and nothing else wakes it.
fn wait_for_hang_up(fd: BorrowedFd<'_>) {
    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::empty())];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) if fds[0].revents().is_none_or(|r| r.intersects(gone)) => return,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Puts an empty pipe, whose writing end is never closed, under standard
/// input, so that a read of it (the editor's, retried after the terminal
/// failed) sleeps instead of failing again at once.
fn park_standard_input() {
    if let Ok((read, write)) = nix::unistd::pipe()
        && nix::unistd::dup2_stdin(&read).is_ok()
    {
        // Never closed: a pipe with no writer would read as its end.
        std::mem::forget(write);
    }
}

/// Puts the terminal's modes back as they were before the first editor
/// started (the editor may be in raw mode when a signal ends the process),
/// and ends the prompt's line. Does nothing where no editor ran.
pub fn restore() {
    if let Some(modes) = host::sync::lock(&MODES).take() {
        let _ = termios::tcsetattr(io::stdin(), SetArg::TCSANOW, &modes);
        if AT_PROMPT.load(Ordering::Relaxed) {
            let mut out = io::stdout();
            let _ = out.write_all(b"\r\n");
            let _ = out.flush();
        }
    }
}

/// Writes `text` and a newline to standard output. A terminal that hung up
/// is not an error here: its hang-up ends the front end on its own path.
pub fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Resolves once standard output, when it is a terminal, has hung up; never
/// where it is not a terminal. For a front end that writes to a terminal and
/// reads none (`logs -f`): a quiet job would otherwise keep it waiting on a
/// terminal nobody sees.
pub async fn output_hung_up() {
    if !io::stdout().is_terminal() {
        return std::future::pending().await;
    }
    let (done, hung_up) = tokio::sync::oneshot::channel::<()>();
    let watch = std::thread::Builder::new()
        .name("jobs-hang-up".into())
        .spawn(move || {
            wait_for_hang_up(io::stdout().as_fd());
            let _ = done.send(());
        });
    match watch {
        Ok(_) => {
            if hung_up.await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        Err(_) => std::future::pending().await,
    }
}
