//! `jobs-host logs`: a job's lines, and with `--follow` the ones it writes
//! until it ends, without consuming anything the model reads.

use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use host::capture::OutputStream;
use host::registry::control::LineQuery;

use super::SessionView;
use crate::daemon::server::handshake::answer;

/// How often `logs --follow` looks for new lines when nothing else wakes it.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// Lines one page of `logs` asks for.
const LOG_PAGE: u32 = 1000;

/// Sends a job's lines of `stream` as `{"line": ...}` (the last `last` only,
/// when given), then, with `follow`, the lines it writes until it ends, then
/// `{"end": ...}`. Nothing is consumed: the model's read cursor stays where
/// it is. While a followed job runs, its last line may still grow, so it is
/// sent once whole or once the job ends.
pub(super) async fn follow_logs(
    view: &SessionView,
    id: &str,
    stream: OutputStream,
    last: Option<u32>,
    follow: bool,
    write: &mut (impl AsyncWriteExt + Unpin),
) -> Result<()> {
    let registry = &view.registry;
    let owner = &view.owner;
    let page = |start: u64, count: u32| {
        registry
            .lines(
                id,
                Some(owner),
                &LineQuery::Range {
                    stream,
                    start,
                    count,
                },
            )
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let mut next = 1;
    if let Some(count) = last {
        let (probe, _) = page(1, 1)?;
        if let Some(extent) = probe.extents.first() {
            next = (extent.last_line + 1)
                .saturating_sub(u64::from(count))
                .max(extent.first_line)
                .max(1);
        }
    }
    loop {
        // Looked at before the page: a job that had ended by then has every
        // line in this page or the next ones.
        let ended = registry
            .inspect(id)
            .is_none_or(|job| job.status.is_terminal());
        let (lines, job) = page(next, LOG_PAGE)?;
        let (first, last_line, whole) = lines
            .extents
            .first()
            .map_or((1, 0, 0), |e| (e.first_line, e.last_line, e.whole_lines));
        if first > next && last_line > 0 {
            answer(write, &json!({"dropped": [next, first - 1]})).await?;
            next = first;
        }
        let upto = if ended || !follow { last_line } else { whole };
        let from = next;
        for line in lines
            .lines
            .iter()
            .filter(|l| l.number >= from && l.number <= upto)
        {
            answer(write, &json!({"line": line.text})).await?;
            next = line.number + 1;
        }
        let more = next <= upto && next > from;
        if more {
            continue;
        }
        if ended || !follow {
            return answer(
                write,
                &json!({"end": {"status": job.status.as_str(), "detail": job.detail}}),
            )
            .await;
        }
        tokio::select! {
            () = registry.settled(id) => {}
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{Stub, lines_of, stream_job};
    use super::*;

    #[tokio::test]
    async fn the_last_lines_then_the_end_are_sent_and_nothing_is_consumed() {
        let stub = Stub::new(&["one"]);
        let (id, feed) = stream_job(&stub.sessions[0]);
        feed.send("a\nb\nc\n".to_owned()).unwrap();
        drop(feed);
        stub.sessions[0].registry.settled(&id).await;
        let mut out = Vec::new();
        follow_logs(
            &stub.sessions[0],
            &id,
            OutputStream::Stdout,
            Some(2),
            false,
            &mut out,
        )
        .await
        .unwrap();
        assert_eq!(
            lines_of(&out),
            [
                json!({"line": "b"}),
                json!({"line": "c"}),
                json!({"end": {"status": "completed", "detail": null}}),
            ]
        );
        // The model's read still has all of it.
        let read = stub.sessions[0]
            .registry
            .lines(
                &id,
                Some(&stub.sessions[0].owner),
                &LineQuery::Range {
                    stream: OutputStream::Stdout,
                    start: 1,
                    count: 10,
                },
            )
            .unwrap();
        assert_eq!(read.0.lines.len(), 3);
    }

    #[tokio::test]
    async fn a_follow_sends_what_the_job_writes_until_it_ends() {
        let stub = Stub::new(&["one"]);
        let (id, feed) = stream_job(&stub.sessions[0]);
        feed.send("first\n".to_owned()).unwrap();
        let view = stub.sessions[0].clone();
        let follower = tokio::spawn(async move {
            let mut out = Vec::new();
            follow_logs(&view, &id, OutputStream::Stdout, None, true, &mut out)
                .await
                .unwrap();
            out
        });
        // A partial line is held until it is whole.
        feed.send("sec".to_owned()).unwrap();
        feed.send("ond\n".to_owned()).unwrap();
        drop(feed);
        let out = follower.await.unwrap();
        assert_eq!(
            lines_of(&out),
            [
                json!({"line": "first"}),
                json!({"line": "second"}),
                json!({"end": {"status": "completed", "detail": null}}),
            ]
        );
    }
}
