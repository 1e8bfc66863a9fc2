//! `jobs-host mcp --session` and `jobs-host shell --session`: the session's
//! front end runs in the daemon; these carry stdio (or the console's lines)
//! to it, and end (the session staying) however the client ends.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{next, session_connection};
use crate::daemon::Hello;
use crate::signals::Signals;
use crate::{console, terminal};

/// `jobs-host mcp --session`: stdin and stdout carried to the daemon's
/// session and back, byte for byte. Ends when the client closes stdin and
/// the daemon has answered, or when the daemon goes away.
///
/// # Errors
///
/// No daemon could be reached or started, or it refused the session.
pub async fn mcp(hello: Hello, cache_dir: Option<&Path>) -> Result<u8> {
    let (mut read, mut write) = session_connection(&hello, cache_dir).await?;
    let up = tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if write.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
        // The client is done: the daemon answers what it has, then closes.
        let _ = write.shutdown().await;
    });
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = read.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        if stdout.write_all(&buf[..n]).await.is_err() || stdout.flush().await.is_err() {
            break;
        }
    }
    if !up.is_finished() {
        eprintln!("jobs-host: the daemon closed the session's connection");
        return Ok(1);
    }
    Ok(0)
}

/// `jobs-host shell --session`: the console, run by the daemon on the
/// session. A script is echoed with its answers as without a daemon; at its
/// end the session stays, with its jobs.
///
/// # Errors
///
/// No daemon, a refused session, or a script line that does not parse.
pub async fn shell(mut hello: Hello, cache_dir: Option<&Path>) -> Result<u8> {
    let interactive = std::io::stdin().is_terminal();
    hello.interactive = interactive;
    let terminal = std::io::stdout().is_terminal();
    let show = move |text: &str| -> String {
        if terminal {
            console::for_terminal(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    let (mut read, mut write) = session_connection(&hello, cache_dir).await?;
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let printer = reedline::ExternalPrinter::<String>::default();
    let notices = printer.sender();
    tokio::spawn(async move {
        while let Ok(Some(value)) = next(&mut read).await {
            match value.get("notice").and_then(Value::as_str) {
                Some(notice) => {
                    let _ = notices.send(show(notice));
                }
                None => {
                    if answers.send(value).is_err() {
                        break;
                    }
                }
            }
        }
    });
    // `Err` only when the connection is gone; a line the console refuses
    // is an `Ok(Err(..))`.
    let mut ask = async |line: &str| -> Result<std::result::Result<Option<String>, String>> {
        let mut message = serde_json::to_vec(&json!({"line": line}))?;
        message.push(b'\n');
        let lost = || anyhow::anyhow!("the daemon closed the console's connection");
        write.write_all(&message).await.map_err(|_| lost())?;
        let answer = answered.recv().await.ok_or_else(lost)?;
        if answer.get("quit").is_some() {
            return Ok(Ok(None));
        }
        if let Some(error) = answer.get("error").and_then(Value::as_str) {
            return Ok(Err(error.to_owned()));
        }
        Ok(Ok(Some(
            answer
                .get("out")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )))
    };
    if interactive {
        terminal::say(&format!(
            "jobs-host shell: session {:?} (its jobs stay when you leave). `help` lists the commands.",
            hello.session.as_deref().unwrap_or_default()
        ));
        // Signals end this client only: the session stays in the daemon, and
        // lingers there as after `exit`.
        let mut signals = Signals::new()?;
        let mut reader = terminal::LineReader::start(printer)?;
        let ended = async {
            loop {
                let line = match reader.next().await {
                    terminal::Next::Line(line) => line,
                    terminal::Next::End(signal) => return Ok(signal.unwrap_or(0)),
                };
                let answer = tokio::select! {
                    answer = ask(&line) => answer?,
                    () = reader.hung_up() => return Ok(libc::SIGHUP),
                };
                match answer {
                    Ok(Some(out)) if !out.is_empty() => terminal::say(&show(&out)),
                    Ok(Some(_)) => {}
                    Ok(None) => return Ok(0),
                    Err(e) => terminal::say(&format!("? {e}")),
                }
            }
        };
        let ended: Result<i32> = tokio::select! {
            ended = ended => ended,
            signal = signals.next() => Ok(signal),
        };
        terminal::restore();
        return ended.map(|signal| if signal == 0 { 0 } else { 128 + signal as u8 });
    } else {
        let stdin = tokio::io::stdin();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdin));
        while let Some(line) = lines.next_line().await? {
            match console::parse(&line) {
                Ok(console::Command::Nothing) => {}
                Ok(_) => {
                    println!("> {}", line.trim());
                    match ask(&line).await? {
                        Ok(Some(out)) if !out.is_empty() => println!("{}", show(&out)),
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => bail!("{}: {e}", line.trim()),
                    }
                }
                Err(e) => bail!("{}: {e}", line.trim()),
            }
        }
    }
    Ok(0)
}
