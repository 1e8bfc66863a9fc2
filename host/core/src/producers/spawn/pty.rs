//! The pseudo-terminals jobs run on (extension `terminal`): the host keeps
//! the controlling side, the job gets the other as its 0-2 and its
//! controlling terminal.

use std::os::fd::OwnedFd;

use rustix::fs::OFlags;

/// A pseudo-terminal made for a job: the host keeps the controller, the job
/// gets the other side as its stdin, stdout, stderr and controlling terminal.
pub(crate) struct Pty {
    /// The controlling side (close-on-exec), where the host reads and writes.
    pub master: OwnedFd,
    /// The job's side (close-on-exec; the child's 0-2 are its duplicates).
    pub slave: OwnedFd,
}

impl Pty {
    /// A new pseudo-terminal of `rows` by `cols`.
    pub(crate) fn open(rows: u16, cols: u16) -> std::io::Result<Pty> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let name = ptsname(&master, Vec::new())?;
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let pty = Pty { master, slave };
        pty.resize(rows, cols)?;
        Ok(pty)
    }

    /// Sets the terminal's size (the job's foreground group gets `SIGWINCH`).
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        set_size(&self.master, rows, cols)
    }
}

/// Sets the size of the terminal whose controlling side is `master`.
pub(crate) fn set_size(
    master: &impl std::os::fd::AsFd,
    rows: u16,
    cols: u16,
) -> std::io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master, size)?;
    Ok(())
}
