//! `jobs-host shell`: the console, interactive on a terminal (see
//! [`crate::terminal`]) or reading a script.

use std::io::IsTerminal;

use anyhow::Result;

use super::Ended;
use crate::wiring::{Host, open_session};
use crate::{console, terminal};

pub(crate) async fn shell(host: Host) -> Result<Ended> {
    let (session, mut announced) = open_session(&host, "shell-session");
    let interactive = std::io::stdin().is_terminal();
    // What jobs wrote reaches the screen with its control characters shown, not
    // acted on; a transcript written to a file or a pipe stays byte for byte.
    let terminal = std::io::stdout().is_terminal();
    let show = move |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    if interactive {
        terminal::say(
            "jobs-host shell: tool calls in, exactly what the model sees out. `help` lists the commands.",
        );
        // Notices that arrive while the prompt waits are shown as they come.
        let printer = reedline::ExternalPrinter::default();
        let sender = printer.sender();
        tokio::spawn(async move {
            while let Some((lane, notice)) = announced.recv().await {
                // Shown as it arrives; the model sees it before its next result.
                let line = show(&console::render_notice(lane, &notice).replacen(
                    "[notice via",
                    "[notice arrived via",
                    1,
                ));
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut reader = terminal::LineReader::start(printer)?;
        let ended = loop {
            let line = match reader.next().await {
                terminal::Next::Line(line) => line,
                terminal::Next::End(None) => break Ended::Done,
                terminal::Next::End(Some(signal)) => break Ended::BySignal(signal),
            };
            let command = match console::parse(&line) {
                Ok(command) => command,
                Err(e) => {
                    terminal::say(&format!("? {e}"));
                    continue;
                }
            };
            // A call that waits (`wait`, a read with a timeout) ends with the
            // terminal too.
            let out = tokio::select! {
                out = console::run(&session, command) => out,
                () = reader.hung_up() => break Ended::BySignal(libc::SIGHUP),
            };
            match out {
                Some(out) if !out.is_empty() => terminal::say(&show(&out)),
                Some(_) => {}
                None => break Ended::Done,
            }
        };
        // Ended as by a signal, the jobs go as on a signal: all at once,
        // within the shutdown grace (see `host_main`).
        if let Ended::Done = ended {
            session.close().await;
        }
        return Ok(ended);
    } else {
        // A script: every line is echoed with its answer, so the transcript reads
        // like the model's side of the conversation. Notices are shown with the
        // results they precede; nobody reads them as they arrive, so the channel
        // goes (it would otherwise hold every notice of the session).
        drop(announced);
        let stdin = tokio::io::stdin();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdin));
        while let Some(line) = lines.next_line().await? {
            match console::parse(&line) {
                Ok(console::Command::Nothing) => {}
                Ok(command) => {
                    println!("> {}", line.trim());
                    match console::run(&session, command).await {
                        Some(out) if !out.is_empty() => println!("{}", show(&out)),
                        Some(_) => {}
                        None => break,
                    }
                }
                Err(e) => {
                    session.close().await;
                    anyhow::bail!("{}: {e}", line.trim());
                }
            }
        }
    }
    session.close().await;
    Ok(Ended::Done)
}
