//! The compile → apply hand-over: a capacity-one channel that always holds the newest value.
//!
//! A newer generation replaces one the applier has not taken yet, so bursts of changes coalesce and
//! the compiler never waits for the applier. The crossbeam channel holds the value; a tokio
//! `Notify` wakes the applier task.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::Notify;

pub struct LatestSender<T> {
    tx: Sender<T>,
    rx: Receiver<T>,
    notify: Arc<Notify>,
}

pub struct LatestReceiver<T> {
    rx: Receiver<T>,
    notify: Arc<Notify>,
}

pub fn latest<T>() -> (LatestSender<T>, LatestReceiver<T>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let notify = Arc::new(Notify::new());
    (LatestSender { tx, rx: rx.clone(), notify: notify.clone() }, LatestReceiver { rx, notify })
}

impl<T> LatestSender<T> {
    /// Offers `value`, replacing one not taken yet. Returns the replaced value, if any.
    pub fn send(&self, mut value: T) -> Option<T> {
        let mut replaced = None;
        loop {
            match self.tx.try_send(value) {
                Ok(()) => break,
                Err(TrySendError::Full(v)) => {
                    // Take the stale value out and try again; the applier may have taken it meanwhile.
                    if let Ok(old) = self.rx.try_recv() {
                        replaced = Some(old);
                    }
                    value = v;
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
        self.notify.notify_one();
        replaced
    }
}

impl<T> LatestReceiver<T> {
    /// Waits for the newest value.
    pub async fn recv(&self) -> T {
        loop {
            if let Ok(v) = self.rx.try_recv() {
                return v;
            }
            self.notify.notified().await;
        }
    }

    /// The value waiting, if any.
    pub fn try_recv(&self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_values_replace_untaken_ones() {
        let (tx, rx) = latest();
        assert_eq!(tx.send(1), None);
        assert_eq!(tx.send(2), Some(1));
        assert_eq!(tx.send(3), Some(2));
        assert_eq!(rx.try_recv(), Some(3));
        assert_eq!(rx.try_recv(), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn recv_waits_for_a_value() {
        let (tx, rx) = latest();
        let waiter = tokio::spawn(async move { rx.recv().await });
        tokio::task::yield_now().await;
        tx.send(7);
        assert_eq!(waiter.await.unwrap(), 7);
    }
}
