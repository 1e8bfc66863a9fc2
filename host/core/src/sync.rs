//! Locks that survive a panic elsewhere (the host's, and its embedders' such
//! as `jobs-host`, one copy).

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking it over from a thread that panicked while holding it.
///
/// Every mutex in the host guards state that each holder leaves consistent
/// before anything that may panic (a producer's hook, a listener, a model's
/// pattern), so a poisoned lock only says that some other call failed; letting
/// the poison spread would wedge every later call instead.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
