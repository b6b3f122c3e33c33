//! The two background threads of `ramjet-top`: the poller (`GET /admin/generations` and
//! `GET /metrics` every interval) and the commander (pin and release, on demand). The UI thread
//! only sends [`Command`]s and drains [`Update`]s, so a slow or dead daemon never freezes it.
//! A command has its own thread so a pin is never queued behind a poll that waits for a timeout;
//! after each answer the commander asks the poller to poll at once.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::client::{AdminClient, ClientError};
use super::model::{Generations, PinAnswer, Scrape};

/// What the operator asked for, after confirming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `POST /admin/rollback`: serve this generation and pin it.
    Pin(u64),
    /// `DELETE /admin/rollback`.
    Release,
}

/// What the background threads report to the UI.
#[derive(Debug, Clone)]
pub enum Update {
    /// One poll. `metrics` is `None` when it was not asked for because the daemon was unreachable.
    Poll { at: Instant, generations: Result<Generations, ClientError>, metrics: Option<Result<Scrape, ClientError>> },
    /// The daemon's answer to a command.
    Answer { command: Command, result: Result<PinAnswer, ClientError> },
}

/// The UI's ends of the channels.
pub struct Worker {
    pub commands: Sender<Command>,
    pub updates: Receiver<Update>,
    threads: [thread::JoinHandle<()>; 2],
}

impl Worker {
    /// Both threads run until the UI drops its channels; one that ended sooner panicked.
    pub fn alive(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }
}

/// Starts both threads. They stop by themselves once the UI drops its ends of the channels.
pub fn spawn(client: AdminClient, interval: Duration) -> std::io::Result<Worker> {
    let client = Arc::new(client);
    let (updates_tx, updates) = mpsc::channel();
    let (commands, commands_rx) = mpsc::channel::<Command>();
    let (poke_tx, poke_rx) = mpsc::channel::<()>();

    let poller = client.clone();
    let tx = updates_tx.clone();
    let polling = thread::Builder::new().name("top-poller".into()).spawn(move || loop {
        let started = Instant::now();
        if tx.send(poll(&poller)).is_err() {
            return;
        }
        let wait = interval.saturating_sub(started.elapsed());
        match poke_rx.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Several pokes while a poll ran need one poll, not several.
        while poke_rx.try_recv().is_ok() {}
    })?;

    let commanding = thread::Builder::new().name("top-commander".into()).spawn(move || {
        for command in commands_rx {
            let result = match command {
                Command::Pin(generation) => client.pin(generation),
                Command::Release => client.release(),
            };
            if updates_tx.send(Update::Answer { command, result }).is_err() {
                return;
            }
            // The poller may be gone already when the UI is quitting; nothing to do then.
            if poke_tx.send(()).is_err() {
                return;
            }
        }
    })?;
    Ok(Worker { commands, updates, threads: [polling, commanding] })
}

fn poll(client: &AdminClient) -> Update {
    let generations = client.generations();
    // Skip the second call when the first found nobody home: it would only wait again.
    let metrics = match &generations {
        Err(ClientError::Unreachable { .. }) => None,
        _ => Some(client.metrics()),
    };
    Update::Poll { at: Instant::now(), generations, metrics }
}
