//! What `top` draws: a title line, the jobs' table, the selected job's tail,
//! and a line for keys, prompts and messages. Laid out for the frame's size
//! on every draw (80×24 and up; smaller still draws what fits). Text a job
//! wrote is shown with its control characters escaped, as `ps` shows it.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState};

use super::super::ps::{age, one_line};
use super::{App, Job, Mode};
use crate::console;

/// Draws `app` on `frame`.
pub(super) fn draw(frame: &mut Frame, app: &App) {
    let [title, table, tail, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(50),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(title_line(app)), title);
    let visible = app.visible();
    let rows: Vec<Row> = visible.iter().map(|job| row(app, job)).collect();
    // 61 columns before the label: at 80, it keeps 19. A session column of
    // 12 holds `mcp-` and a 7-digit pid.
    let widths = [
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Length(14),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Min(8),
    ];
    let header = Row::new([
        "ID", "SESSION", "STATUS", "AGE", "CPU%", "MEM", "PORTS", "LABEL",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let mut state = TableState::default().with_selected(app.selected_row());
    frame.render_stateful_widget(
        Table::new(rows, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
        table,
        &mut state,
    );
    let selected = app.selected_job();
    let name = match &selected {
        Some(job) => format!(
            " {} {} ({}) ",
            job.id,
            if app.stderr { "stderr" } else { "stdout" },
            shown(&job.session)
        ),
        None => " output ".to_owned(),
    };
    // The tail's last lines that fit, the newest at the bottom.
    let room = usize::from(tail.height.saturating_sub(2));
    let start = app.tail.len().saturating_sub(room);
    let lines: Vec<Line> = app.tail[start..]
        .iter()
        .map(|l| Line::raw(shown(l)))
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::TOP).title(name)),
        tail,
    );
    frame.render_widget(Paragraph::new(footer_line(app)), footer);
}

fn title_line(app: &App) -> String {
    if !app.daemon && app.sessions == 0 {
        return "jobs-host top: no daemon and no jobs-host mcp is running for this user".to_owned();
    }
    let filter = if app.filter.is_empty() {
        String::new()
    } else {
        format!(", filter {:?}", app.filter)
    };
    format!(
        "jobs-host top: {} job(s) in {} session(s){filter}",
        app.jobs.len(),
        app.sessions
    )
}

fn footer_line(app: &App) -> String {
    match &app.mode {
        Mode::Filter(text) => {
            format!("filter (session or status): {text}_  Enter keeps, Esc drops")
        }
        Mode::ConfirmKill(session, id) => {
            format!(
                "kill {id} of session {}? y kills, any other key keeps it",
                shown(session)
            )
        }
        Mode::Browse => match &app.message {
            Some(message) => shown(message),
            None => "q quit  ↑↓ select  l logs -f  x kill  / filter  e stderr".to_owned(),
        },
    }
}

fn row<'a>(app: &App, job: &Job) -> Row<'a> {
    let end = job.finished_at.unwrap_or(app.now);
    let running = job.finished_at.is_none();
    let cpu = job
        .pid
        .filter(|_| running)
        .and_then(|pid| app.stats.cpu(&app.before, pid))
        .map_or_else(|| "-".to_owned(), |c| format!("{c:.0}"));
    let memory = job
        .pid
        .filter(|_| running)
        .and_then(|pid| app.stats.memory(pid))
        .map_or_else(|| "-".to_owned(), bytes);
    let ports = if job.ports.is_empty() {
        "-".to_owned()
    } else {
        job.ports
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    Row::new([
        job.id.clone(),
        shown(&job.session),
        status(job),
        age(end.saturating_sub(job.started_at)),
        cpu,
        memory,
        ports,
        shown(&one_line(&job.label)),
    ])
}

/// A status with its end: `completed 0`, `killed SIGTERM`, `failed 3`, or
/// the status and its detail's first words.
fn status(job: &Job) -> String {
    let Some(detail) = &job.detail else {
        return job.status.clone();
    };
    let first = detail.split(';').next().unwrap_or_default();
    let end = first
        .strip_prefix("exit code: ")
        .or_else(|| first.strip_prefix("signal: "))
        .unwrap_or(first);
    format!("{} {end}", job.status)
}

/// `512K`, `38M`, `1.2G`.
fn bytes(n: u64) -> String {
    const K: u64 = 1024;
    match n {
        0..K => format!("{n}B"),
        K..0x10_0000 => format!("{}K", n / K),
        0x10_0000..0x4000_0000 => format!("{}M", n / (K * K)),
        _ => format!("{:.1}G", n as f64 / (K * K * K) as f64),
    }
}

/// Text a job or a person wrote, made safe for the terminal.
fn shown(text: &str) -> String {
    console::for_terminal(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{Job, bytes, status};

    #[test]
    fn an_end_is_said_short() {
        let job = |status: &str, detail: Option<&str>| Job {
            source: None,
            id: "bash-1".into(),
            session: "s".into(),
            status: status.into(),
            detail: detail.map(str::to_owned),
            started_at: 0,
            finished_at: None,
            pid: None,
            ports: Vec::new(),
            label: String::new(),
        };
        assert_eq!(status(&job("running", None)), "running");
        assert_eq!(
            status(&job("completed", Some("exit code: 0"))),
            "completed 0"
        );
        assert_eq!(
            status(&job("killed", Some("signal: SIGTERM; sandbox without: x"))),
            "killed SIGTERM"
        );
        assert_eq!(bytes(2048), "2K");
        assert_eq!(bytes(3 << 20), "3M");
    }
}
