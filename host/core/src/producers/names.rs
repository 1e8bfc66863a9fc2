//! Job names: a start that names a job held by a live job of the same
//! owner answers that job instead of starting another. One [`Names`] serves
//! every producer a session routes to, so a name is one job whether it runs
//! here or on an engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::owner::Owner;
use crate::registry::{JobRegistry, StartError};
use crate::sync::lock;

pub use crate::bash::{MAX_NAME_BYTES, Started};

/// A name as one owner session holds it (`None`: unowned jobs).
type Key = (Option<String>, String);

/// Live names per owner session, each to its job's id.
#[derive(Clone, Default)]
pub struct Names {
    held: Arc<Mutex<HashMap<Key, String>>>,
}

impl Names {
    /// No names held.
    pub fn new() -> Names {
        Names::default()
    }

    /// Starts a job with `start` unless `name` is held by a live job of
    /// `owner`, which is then the answer. A name of a job that has ended is
    /// free again.
    ///
    /// # Errors
    ///
    /// A blank name, one with a control character or longer than
    /// [`MAX_NAME_BYTES`], or `start`'s own refusal.
    pub fn start(
        &self,
        registry: &JobRegistry,
        owner: Option<&Owner>,
        name: Option<String>,
        start: impl FnOnce() -> Result<String, StartError>,
    ) -> Result<Started, StartError> {
        let Some(name) = name else {
            return start().map(Started::New);
        };
        check(&name)?;
        let key = (owner.map(|o| o.session_id().to_owned()), name);
        // Held from the lookup to the registration, so two starts of one name
        // cannot both start.
        let mut held = lock(&self.held);
        held.retain(|_, id| {
            registry
                .inspect(id)
                .is_some_and(|job| !job.status.is_terminal())
        });
        if let Some(id) = held.get(&key) {
            return Ok(Started::Existing(id.clone()));
        }
        let id = start()?;
        held.insert(key, id.clone());
        Ok(Started::New(id))
    }
}

fn check(name: &str) -> Result<(), StartError> {
    if name.trim().is_empty() {
        return Err(StartError::Producer(
            "invalid name: expected a non-blank string".to_owned(),
        ));
    }
    // A name is shown in every list and status line: it may not move the
    // cursor, recolour a terminal or reorder text (the console escapes job
    // output, but a name is the model's own word, so it is refused).
    if let Some(c) = name.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(StartError::Producer(format!(
            "invalid name: it contains the control character U+{:04X}",
            u32::from(c)
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(StartError::Producer(format!(
            "invalid name: {} bytes is more than the limit of {MAX_NAME_BYTES} bytes",
            name.len()
        )));
    }
    Ok(())
}

/// Characters that reorder displayed text (bidirectional embeddings,
/// overrides and isolates), which a terminal or a UI acts on.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}
