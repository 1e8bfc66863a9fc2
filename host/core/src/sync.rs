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

/// A `tokio::sync::watch` channel made only when someone first subscribes;
/// until then its value lives here alone.
///
/// A job carries several flags and counters that a wait may watch (its
/// settlement, its announcement, its leader's spawn and end, its output's
/// growth), and most jobs are never watched. tokio's channel is a shared
/// allocation of 344 bytes (eight `Notify`s for many readers), which is what a
/// live job paid five times over; this is 24 bytes until a subscriber comes.
/// Receivers behave as the channel's own: they see every later change, and
/// `changed` fails once this is dropped.
pub(crate) struct LazyWatch<T> {
    inner: Mutex<LazyInner<T>>,
}

struct LazyInner<T> {
    value: T,
    sender: Option<tokio::sync::watch::Sender<T>>,
}

impl<T: Clone> LazyWatch<T> {
    /// A watch holding `value`, with no channel yet.
    pub(crate) const fn new(value: T) -> LazyWatch<T> {
        LazyWatch {
            inner: Mutex::new(LazyInner {
                value,
                sender: None,
            }),
        }
    }

    /// A receiver that has seen the current value, made with the channel on
    /// the first call.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<T> {
        let mut inner = lock(&self.inner);
        if let Some(sender) = &inner.sender {
            return sender.subscribe();
        }
        let (sender, receiver) = tokio::sync::watch::channel(inner.value.clone());
        inner.sender = Some(sender);
        receiver
    }

    /// Sets the value, telling the receivers if there are any.
    pub(crate) fn send_replace(&self, value: T) {
        let mut inner = lock(&self.inner);
        if let Some(sender) = &inner.sender {
            sender.send_replace(value.clone());
        }
        inner.value = value;
    }

    /// Wakes the receivers without changing the value (the channel's
    /// `send_modify(|_| {})`): something they look at besides it changed. A
    /// receiver made later looks at it anyway.
    pub(crate) fn touch(&self) {
        if let Some(sender) = &lock(&self.inner).sender {
            sender.send_modify(|_| {});
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LazyWatch;

    #[tokio::test]
    async fn a_late_subscriber_sees_the_value_and_every_change() {
        let watch = LazyWatch::new(0u64);
        watch.send_replace(5);
        let mut rx = watch.subscribe();
        assert_eq!(*rx.borrow_and_update(), 5);
        watch.touch();
        rx.changed().await.expect("a touch wakes a receiver");
        assert_eq!(*rx.borrow_and_update(), 5);
        watch.send_replace(7);
        rx.changed().await.expect("a change wakes a receiver");
        assert_eq!(*rx.borrow(), 7);
        let mut second = watch.subscribe();
        assert!(!second.has_changed().expect("the channel is open"));
        drop(watch);
        assert!(
            second.changed().await.is_err(),
            "dropped: the channel is closed"
        );
    }

    #[test]
    fn it_is_small_until_watched() {
        assert!(size_of::<LazyWatch<u64>>() <= 24);
        assert!(size_of::<LazyWatch<bool>>() <= 24);
    }

    #[tokio::test]
    async fn a_flag_set_before_anyone_waited_is_seen_at_once() {
        let flag = LazyWatch::new(false);
        flag.send_replace(true);
        let mut rx = flag.subscribe();
        rx.wait_for(|set| *set).await.expect("already set");
    }
}
