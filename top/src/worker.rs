//! The two background threads of `ramjet-top`: the poller (asks every interval) and the commander
//! (pin and release, on demand). The UI thread only sends commands and drains updates, so a slow or
//! dead daemon never freezes it. A command has its own thread so a pin is never queued behind a poll
//! that waits for a timeout; after each answer the commander asks the poller to poll at once.
//!
//! [`spawn`] runs both threads for either view: the single-replica view polls one daemon with
//! [`poll`] and sends [`Command`]s ([`single`]); the fleet view polls every replica and sends
//! [`FleetCommand`]s to all of them ([`fleet()`]).

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use super::client::{AdminClient, ClientError, Token};
use super::fleet::{each, Fleet};
use super::model::{Generations, PinAnswer, Scrape};

/// What the operator asked one daemon for, after confirming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `POST /admin/rollback`: serve this generation and pin it.
    Pin(u64),
    /// `DELETE /admin/rollback`.
    Release,
}

/// What the background threads report to the single-replica view.
#[derive(Debug, Clone)]
pub enum Update {
    /// One poll. `metrics` is `None` when it was not asked for because the daemon was unreachable.
    Poll { at: Instant, generations: Result<Generations, ClientError>, metrics: Option<Result<Scrape, ClientError>> },
    /// The daemon's answer to a command.
    Answer { command: Command, result: Result<PinAnswer, ClientError> },
}

/// The UI's ends of the channels.
pub struct Worker<C, U> {
    pub commands: Sender<C>,
    pub updates: Receiver<U>,
    threads: [thread::JoinHandle<()>; 2],
}

impl<C, U> Worker<C, U> {
    /// Both threads run until the UI drops its channels; one that ended sooner panicked.
    pub fn alive(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }
}

/// Starts both threads: `poll` runs every `interval` (and at once after each command), `command`
/// runs each command the UI sends; what they return goes to the UI. They stop by themselves once
/// the UI drops its ends of the channels.
pub fn spawn<C, U>(
    interval: Duration,
    poll: impl Fn() -> U + Send + 'static,
    command: impl Fn(C) -> U + Send + 'static,
) -> std::io::Result<Worker<C, U>>
where
    C: Send + 'static,
    U: Send + 'static,
{
    let (updates_tx, updates) = mpsc::channel();
    let (commands, commands_rx) = mpsc::channel::<C>();
    let (poke_tx, poke_rx) = mpsc::channel::<()>();

    let tx = updates_tx.clone();
    let polling = thread::Builder::new().name("top-poller".into()).spawn(move || loop {
        let started = Instant::now();
        if tx.send(poll()).is_err() {
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
        for c in commands_rx {
            if updates_tx.send(command(c)).is_err() {
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

/// The single-replica view's worker: polls `client` and sends it pin and release.
pub fn single(client: AdminClient, interval: Duration) -> std::io::Result<Worker<Command, Update>> {
    let client = std::sync::Arc::new(client);
    let poller = client.clone();
    spawn(
        interval,
        move || poll(&poller),
        move |command| {
            let result = match command {
                Command::Pin(generation) => client.pin(generation),
                Command::Release => client.release(),
            };
            Update::Answer { command, result }
        },
    )
}

/// One poll of one daemon: `/admin/generations`, then `/metrics` and `/admin/traffic` if the
/// daemon is there.
pub fn poll(client: &AdminClient) -> Update {
    let generations = client.generations();
    // Skip the other calls when the first found nobody home: they would only wait again.
    let metrics = match &generations {
        Err(ClientError::Unreachable { .. }) => None,
        // A daemon older than /admin/traffic just has no routes panel.
        _ => Some(client.metrics().map(|scrape| Scrape { routes: client.traffic().ok(), ..scrape })),
    };
    Update::Poll { at: Instant::now(), generations, metrics }
}

/// What the operator asked of every replica, after confirming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetCommand {
    /// `POST /admin/rollback {"digest": ...}` on every replica: serve this table and pin it.
    Pin(String),
    /// `DELETE /admin/rollback` on every replica.
    Release,
}

/// One replica's answer, by its address.
pub type Answers<T> = Vec<(SocketAddr, Result<T, ClientError>)>;

/// What the background threads report to the fleet view.
#[derive(Debug, Clone)]
pub enum FleetUpdate {
    /// One poll of every replica; `lookup_error` says why the name did not resolve this time (the
    /// addresses are then those of the last lookup that worked).
    Poll { at: Instant, replicas: Answers<Generations>, lookup_error: Option<String> },
    /// Every replica's answer to a command.
    Answer { command: FleetCommand, results: Answers<PinAnswer> },
}

/// The fleet view's worker: polls every replica behind the name at once, and sends a command to
/// every replica at once. Each call has its own timeout, so a hung replica costs one timeout.
pub fn fleet(
    fleet: Fleet,
    token: Option<Token>,
    interval: Duration,
    timeout: Duration,
) -> std::io::Result<Worker<FleetCommand, FleetUpdate>> {
    let fleet = std::sync::Arc::new(fleet);
    let poller = fleet.clone();
    spawn(
        interval,
        move || {
            let (addrs, lookup_error) = poller.addresses();
            let replicas = each(&addrs, None, timeout, AdminClient::generations);
            FleetUpdate::Poll { at: Instant::now(), replicas, lookup_error }
        },
        move |command| {
            let (addrs, _) = fleet.addresses();
            let results = match &command {
                FleetCommand::Pin(digest) => each(&addrs, token.as_ref(), timeout, |c| c.pin_digest(digest)),
                FleetCommand::Release => each(&addrs, token.as_ref(), timeout, AdminClient::release),
            };
            FleetUpdate::Answer { command, results }
        },
    )
}
