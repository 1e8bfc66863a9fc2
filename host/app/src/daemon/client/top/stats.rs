//! CPU and memory of each job, from `/proc`: every process of the session
//! its leader leads (a job's leader calls `setsid`), summed. One walk of
//! `/proc` per refresh, whatever the number of jobs.

use std::collections::HashMap;
use std::time::Instant;

/// What one walk of `/proc` found, per session leader.
#[derive(Default)]
pub(super) struct Stats {
    /// When the walk was made.
    at: Option<Instant>,
    /// Per session id: CPU time so far (clock ticks) and resident bytes.
    sessions: HashMap<i32, (u64, u64)>,
}

impl Stats {
    /// A new walk of `/proc`.
    pub(super) fn read() -> Stats {
        let mut sessions: HashMap<i32, (u64, u64)> = HashMap::new();
        let page = rustix::param::page_size() as u64;
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Stats::default();
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            // A process gone between the listing and the read is skipped.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some((sid, ticks, rss_pages)) = parse_stat(&stat) {
                let sum = sessions.entry(sid).or_default();
                sum.0 += ticks;
                sum.1 += rss_pages * page;
            }
        }
        Stats {
            at: Some(Instant::now()),
            sessions,
        }
    }

    /// Whether this walk is older than `age` (or was never made).
    pub(super) fn older_than(&self, age: std::time::Duration) -> bool {
        self.at.is_none_or(|at| at.elapsed() >= age)
    }

    /// The resident bytes of `leader`'s session.
    pub(super) fn memory(&self, leader: i32) -> Option<u64> {
        self.sessions.get(&leader).map(|s| s.1)
    }

    /// `leader`'s session's CPU use between `before` and this walk, in
    /// percent of one core.
    pub(super) fn cpu(&self, before: &Stats, leader: i32) -> Option<f64> {
        let (now, then) = (self.at?, before.at?);
        let elapsed = now.duration_since(then).as_secs_f64();
        let (ticks, _) = self.sessions.get(&leader)?;
        let (earlier, _) = before.sessions.get(&leader)?;
        let per_second = rustix::param::clock_ticks_per_second() as f64;
        (elapsed > 0.0)
            .then(|| ticks.saturating_sub(*earlier) as f64 / per_second / elapsed * 100.0)
    }
}

/// From a `/proc/PID/stat` line: the session id, utime + stime and the
/// resident pages. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn parse_stat(stat: &str) -> Option<(i32, u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) pgrp(2) session(3) ... utime(11)
    // stime(12) ... rss(21).
    let sid = fields.get(3)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let rss: u64 = fields.get(21)?.parse().ok()?;
    Some((sid, utime + stime, rss))
}

#[cfg(test)]
mod tests {
    use super::parse_stat;

    #[test]
    fn a_stat_line_with_a_strange_name_is_read_from_its_last_parenthesis() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 \
                    123 1000000 250 18446744073709551615";
        assert_eq!(parse_stat(line), Some((4242, 10, 250)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_in_the_walk() {
        let stats = super::Stats::read();
        // The session id as `/proc` says it, not `getsid`: where the
        // session's leader lives outside this pid namespace (a container
        // entered from outside) it is 0, which `getsid` cannot return.
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (sid, _, _) = parse_stat(&own).unwrap();
        assert!(stats.memory(sid).unwrap() > 0);
    }
}
