//! A job's output as it is taken from the engine's log: the engine's own
//! lines taken out, the start's output limit kept, and, for a job that
//! outlives its host, every byte taken kept in a file of its own first
//! (see [`LogCopy`]), so a host that restarts takes it on where it was.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::capture::{OutputStream, SharedCapture};

/// The shell line the engine runs: the line that marks where the job's own
/// output begins, then the relay under the engine's Python where there is
/// one, else the command under bash with stderr merged.
pub(super) const ENTRYPOINT: &str = "printf '%s\\n' \"$JOBS_HOST_BEGIN\"; command -v python3 >/dev/null 2>&1 && exec python3 -c \"$JOBS_HOST_RELAY\"; exec bash -c \"$JOBS_HOST_COMMAND\" 2>&1";

/// The most of the engine's own lines (its runtime environment's setup) held
/// back while the line that begins the job's output has not come; past it
/// they are the job's output after all.
const MAX_HEADER_BYTES: usize = 64 << 10;

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The line the entrypoint prints before the command runs: the engine's log
/// holds its own lines before it, which are not the job's output.
pub(super) fn begin_line(submission_id: &str) -> String {
    format!("::jobs-host begin {submission_id}::")
}

/// The job's output as it is taken from the engine's log: the engine's own
/// lines before the begin line held back, then the job's bytes into the
/// capture up to the start's output limit. Taken under the cursor's lock.
pub(super) struct Output {
    /// Where the job's bytes go; `None`: into `collected` (a log read back
    /// for a person, with no job to hold it).
    capture: Option<SharedCapture>,
    collected: Vec<u8>,
    begin: Vec<u8>,
    /// The log before the begin line, while it has not come.
    header: Option<Vec<u8>>,
    /// The line the engine writes as it starts the entrypoint, which races
    /// with the job's first output: taken out once, wherever it lands.
    engine_line: Option<Vec<u8>>,
    /// The job's bytes held while they may be the start of that line.
    held: Vec<u8>,
    /// The job's bytes before those held (the looking ends past
    /// [`MAX_HEADER_BYTES`] of them).
    looked: usize,
    pushed: u64,
    limit: Option<u64>,
    /// Set once the limit is reached: the job is stopped for it.
    pub(super) reached: Option<String>,
    /// Where every byte taken goes first, for a job that outlives its host.
    copy: Option<LogCopy>,
    /// The job's bytes still to be left out: those the model read that a
    /// copy cut short (a write that failed) no longer holds.
    skip: u64,
}

impl Output {
    pub(super) fn new(capture: SharedCapture, submission_id: &str, limit: Option<u64>) -> Output {
        Output::into(Some(capture), submission_id, limit)
    }

    fn into(capture: Option<SharedCapture>, submission_id: &str, limit: Option<u64>) -> Output {
        Output {
            capture,
            collected: Vec::new(),
            begin: format!("{}\n", begin_line(submission_id)).into_bytes(),
            header: Some(Vec::new()),
            engine_line: Some(
                format!("Running entrypoint for job {submission_id}: {ENTRYPOINT}\n").into_bytes(),
            ),
            held: Vec::new(),
            looked: 0,
            pushed: 0,
            limit,
            reached: None,
            copy: None,
            skip: 0,
        }
    }

    /// Keeps every byte taken from now on in `copy` first.
    pub(super) fn keep_in(&mut self, copy: LogCopy) {
        self.copy = Some(copy);
    }

    /// Takes a part of the log; answers true when it reached the limit.
    pub(super) fn take(&mut self, bytes: &[u8]) -> bool {
        if let Some(copy) = &mut self.copy
            && let Err(e) = copy.file.write_all(bytes)
        {
            // What the copy lacks is read from the engine again by the host
            // that takes the job on (see `Output::pushed` and `Output::skip`).
            tracing::warn!(file = %copy.path.display(), error = %e, "a remote job's log copy stops here");
            self.copy = None;
        }
        let Some(header) = &mut self.header else {
            return self.job_bytes(bytes);
        };
        header.extend_from_slice(bytes);
        // Only a begin line within the log's first bytes counts, wherever
        // the chunks were cut: the same log read back after a restart, in
        // other chunks, gives the same output.
        let window = header.len().min(MAX_HEADER_BYTES);
        let rest = match find(&header[..window], &self.begin) {
            Some(at) => {
                let rest = header.split_off(at + self.begin.len());
                if self
                    .engine_line
                    .as_ref()
                    .is_some_and(|line| find(header, line).is_some())
                {
                    self.engine_line = None;
                }
                rest
            }
            None if header.len() >= MAX_HEADER_BYTES => std::mem::take(header),
            None => return false,
        };
        self.header = None;
        self.job_bytes(&rest)
    }

    /// The job's own bytes, without the engine's line.
    fn job_bytes(&mut self, bytes: &[u8]) -> bool {
        let Some(line) = &self.engine_line else {
            return self.push(bytes);
        };
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(bytes);
        // Only a line that begins within the job's first bytes is the
        // engine's, wherever the chunks were cut (see `take`): `looked` is
        // how many of the job's bytes lie before `data`.
        let start = self.looked;
        let window = (MAX_HEADER_BYTES.saturating_sub(start) + line.len()).min(data.len());
        if let Some(at) = find(&data[..window], line) {
            data.drain(at..at + line.len());
            self.engine_line = None;
            return self.push(&data);
        }
        if start + data.len() >= MAX_HEADER_BYTES + line.len() {
            self.engine_line = None;
            return self.push(&data);
        }
        // Held back: the longest end that may begin the line.
        let keep = (1..line.len().min(data.len() + 1))
            .rev()
            .find(|&n| data.ends_with(&line[..n]))
            .unwrap_or(0);
        self.held = data.split_off(data.len() - keep);
        self.looked = start + data.len();
        self.push(&data)
    }

    /// The end of the log: what was held back is the job's output (all of
    /// it when the begin line never came: the engine failed the job before
    /// it ran, and its words are what there is).
    pub(super) fn finish(&mut self) {
        if let Some(header) = self.header.take() {
            self.push(&header);
        }
        let held = std::mem::take(&mut self.held);
        self.push(&held);
    }

    /// How many of the job's bytes reached the capture.
    pub(super) fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Leaves out the job's next `bytes` bytes (see the field).
    pub(super) fn skip(&mut self, bytes: u64) {
        self.skip = bytes;
    }

    fn push(&mut self, bytes: &[u8]) -> bool {
        if self.reached.is_some() {
            return false;
        }
        let skipped = usize::try_from(self.skip)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        self.skip -= skipped as u64;
        let bytes = &bytes[skipped..];
        let max = self.limit.unwrap_or(u64::MAX);
        let room = usize::try_from(max.saturating_sub(self.pushed)).unwrap_or(usize::MAX);
        let part = &bytes[..bytes.len().min(room)];
        if !part.is_empty() {
            match &self.capture {
                Some(capture) => {
                    capture.push(OutputStream::Stdout, part);
                }
                None => self.collected.extend_from_slice(part),
            }
            self.pushed += part.len() as u64;
        }
        if bytes.len() > room {
            self.reached = Some(format!("output limit reached ({max} bytes)"));
            return true;
        }
        false
    }
}

/// A file that holds a remote job's log as it was taken, byte for byte:
/// its length is how much of the log was taken (the cursor), and a host
/// taken on the job after a restart reads it back through a new
/// [`Output`] and follows the log on from there. It is written before the
/// bytes reach the capture, so it never holds less than the model saw.
#[derive(Debug)]
pub(super) struct LogCopy {
    path: PathBuf,
    file: std::fs::File,
}

impl LogCopy {
    /// A new, empty copy `remote-<n>` in `dir` (private, and never one that
    /// exists: another host's job may own it).
    pub(super) fn make(dir: &Path) -> std::io::Result<LogCopy> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        loop {
            let path = dir.join(format!("remote-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
            match std::fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => return Ok(LogCopy { path, file }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The copy at `path`, read back into `output`, and kept on from its
    /// end; answers it and its length (the bytes of the log taken).
    pub(super) fn resume(path: &Path, output: &mut Output) -> std::io::Result<(LogCopy, u64)> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)?;
        let taken = read_into(&mut file, output)?;
        let copy = LogCopy {
            path: path.to_owned(),
            file,
        };
        Ok((copy, taken))
    }

    /// Where it is.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads `file` from where it is to its end into `output`; answers how
/// many bytes it read.
fn read_into(file: &mut std::fs::File, output: &mut Output) -> std::io::Result<u64> {
    use std::io::Read;
    let mut buffer = vec![0u8; 64 << 10];
    let mut taken = 0u64;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => return Ok(taken),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        output.take(&buffer[..n]);
        taken += n as u64;
    }
}

/// The output of the remote job `submission_id` as the copy of its log at
/// `path` holds it (the engine's own lines left out), for a person who
/// asks while no host follows the job.
///
/// # Errors
///
/// The copy cannot be read.
pub fn kept_output(path: &Path, submission_id: &str) -> std::io::Result<Vec<u8>> {
    let mut output = Output::into(None, submission_id, None);
    read_into(&mut std::fs::File::open(path)?, &mut output)?;
    output.finish();
    Ok(output.collected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(limit: Option<u64>) -> (SharedCapture, Output) {
        let limits = crate::capture::OutputLimits {
            max_spill_bytes: 0,
            ..Default::default()
        };
        let capture = SharedCapture::new(std::path::Path::new(""), limits, None);
        (capture.clone(), Output::new(capture, "sid", limit))
    }

    #[test]
    fn the_engines_own_lines_are_not_the_jobs_output() {
        let (capture, mut out) = output(None);
        let line = format!("Running entrypoint for job sid: {ENTRYPOINT}\n");
        assert!(!out.take(b"2026 INFO job_manager.py -- Runtime env is setting up.\n"));
        out.take(b"::jobs-host begin sid::\npar");
        // The engine's line lands inside the job's first line, cut across
        // two chunks.
        out.take(format!("t{}", &line[..10]).as_bytes());
        assert_eq!(capture.read_delta(), "part");
        out.take(format!("{}hi\n", &line[10..]).as_bytes());
        assert_eq!(capture.read_delta(), "hi\n");
        // Once taken out, the same words are the job's own.
        out.take(line.as_bytes());
        assert_eq!(capture.read_delta(), line);
    }

    #[test]
    fn a_job_the_engine_never_ran_shows_the_engines_words() {
        let (capture, mut out) = output(None);
        out.take(b"runtime env setup failed: no such package\n");
        assert_eq!(capture.read_delta(), "");
        out.finish();
        assert_eq!(
            capture.read_delta(),
            "runtime env setup failed: no such package\n"
        );
    }

    #[test]
    fn output_past_the_limit_is_not_taken() {
        let (capture, mut out) = output(Some(5));
        let line = format!("Running entrypoint for job sid: {ENTRYPOINT}\n");
        out.take(format!("::jobs-host begin sid::\n{line}abc").as_bytes());
        assert!(out.take(b"defg"));
        assert_eq!(capture.read_delta(), "abcde");
        assert_eq!(
            out.reached.as_deref(),
            Some("output limit reached (5 bytes)")
        );
        assert!(!out.take(b"more"));
    }

    #[test]
    fn a_log_copy_read_back_gives_the_same_output_and_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let line = format!("Running entrypoint for job sid: {ENTRYPOINT}\n");
        let chunks = [
            "setting up\n::jobs-host begin sid::\nfi".to_owned(),
            format!("rst\n{line}sec"),
            "ond\n\u{fffd}third".to_owned(),
        ];
        let (first, mut out) = output(None);
        let copy = LogCopy::make(dir.path()).unwrap();
        let path = copy.path().to_owned();
        out.keep_in(copy);
        for chunk in &chunks[..2] {
            out.take(chunk.as_bytes());
        }
        // A host dies here; the next reads the copy back.
        let (second, mut again) = output(None);
        let (copy, taken) = LogCopy::resume(&path, &mut again).unwrap();
        assert_eq!(taken, (chunks[0].len() + chunks[1].len()) as u64);
        again.keep_in(copy);
        again.take(chunks[2].as_bytes());
        again.finish();
        // The same output as the dead host's, and then the rest.
        assert_eq!(first.read_delta(), "first\nsec");
        assert_eq!(second.read_delta(), "first\nsecond\n\u{fffd}third");
        // The copy holds the whole log as taken, once.
        let kept = std::fs::read_to_string(&path).unwrap();
        assert_eq!(kept, chunks.concat());
        // Two copies in one directory never share a file.
        let other = LogCopy::make(dir.path()).unwrap();
        assert_ne!(other.path(), path);
    }

    #[test]
    fn a_copy_cut_short_shows_nothing_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote-1");
        // The model read "abcdef"; the copy's last write failed after "abc".
        std::fs::write(&path, "::jobs-host begin sid::\nabc").unwrap();
        let (capture, mut out) = output(None);
        let (copy, taken) = LogCopy::resume(&path, &mut out).unwrap();
        out.keep_in(copy);
        out.skip(6u64.saturating_sub(out.pushed()));
        capture.set_cursors([6, 0]);
        // The engine's log from the copy's length on.
        assert_eq!(taken, 27);
        out.take(b"def");
        out.take(b"ghi\n");
        assert_eq!(capture.read_delta(), "ghi\n");
    }

    #[test]
    fn the_same_log_in_other_chunks_gives_the_same_output() {
        let line = format!("Running entrypoint for job sid: {ENTRYPOINT}\n");
        // A header longer than the window, a begin line past it, and the
        // engine's line past the job's window: every cut the same.
        let mut log = "x".repeat(MAX_HEADER_BYTES - 10).into_bytes();
        log.extend_from_slice(b"::jobs-host begin sid::\n");
        log.extend_from_slice("y".repeat(MAX_HEADER_BYTES).as_bytes());
        log.extend_from_slice(line.as_bytes());
        log.extend_from_slice(b"end\n");
        let mut outputs = Vec::new();
        for size in [1000, 4096, 65536, log.len()] {
            let (capture, mut out) = output(None);
            for chunk in log.chunks(size) {
                out.take(chunk);
            }
            out.finish();
            outputs.push(capture.read_delta());
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]));
        // Past their windows the begin line and the engine's line are the
        // job's output (a read shows the end of it).
        assert!(outputs[0].contains(&format!("y{line}end\n")));
    }
}
