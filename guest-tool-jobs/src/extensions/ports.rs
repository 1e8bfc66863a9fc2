//! The ports extension: the TCP ports a live job listens on.

use crate::config::Config;
use crate::model::{JobSnapshot, JobsView, ListeningPort};

/// `listening on 127.0.0.1:8000, [::]:8000`, or `None` when there are none.
pub fn listening(ports: &[ListeningPort]) -> Option<String> {
    (!ports.is_empty()).then(|| {
        let list = ports
            .iter()
            .map(ListeningPort::display)
            .collect::<Vec<_>>()
            .join(", ");
        format!("listening on {list}")
    })
}

/// The listening ports of a live job, when the extension is on (errors and a
/// host without the call show nothing).
pub fn ports_of(view: &dyn JobsView, config: &Config, job: &JobSnapshot) -> Option<String> {
    if !config.extensions.ports || job.status.is_terminal() {
        return None;
    }
    listening(&view.ports(&job.id).ok()?)
}
