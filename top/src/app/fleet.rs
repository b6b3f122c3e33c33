//! The fleet view's state: every replica behind one name as the last poll found it, the compiled
//! tables (digests) they hold, and pin and release for all of them at once. No I/O here either:
//! keys become at most one [`FleetCommand`], and updates fold in the answers ([`View`]).
//!
//! Generation numbers are per replica, so the operator selects a table by its digest; `p` pins that
//! digest on every replica, `u` releases every replica. Both ask first, with the counts of
//! [`FleetApp::plan`].

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crossterm::event::KeyEvent;

use super::{take_answer, Controls, Describe, Message, View};
use crate::client::ClientError;
use crate::fleet::{majority, serving_digest};
use crate::model::{Generations, PinAnswer};
use crate::worker::{Answers, FleetCommand, FleetUpdate};

impl Describe for FleetCommand {
    fn describe(&self) -> String {
        match self {
            FleetCommand::Pin(digest) => format!("pin of table {digest} on every replica"),
            FleetCommand::Release => "release on every replica".to_string(),
        }
    }
}

/// One replica as the last poll found it.
#[derive(Debug, Clone)]
pub struct Replica {
    pub addr: SocketAddr,
    pub status: Result<Generations, ClientError>,
}

impl Replica {
    pub fn serving_digest(&self) -> Option<&str> {
        self.status.as_ref().ok().and_then(serving_digest)
    }

    /// The digest of the newest generation in its ring.
    pub fn newest_digest(&self) -> Option<&str> {
        let g = self.status.as_ref().ok()?;
        g.generations.iter().find(|e| e.generation == g.newest).map(|e| e.digest.as_str())
    }

    /// This replica's generation number for the table `digest`, if its ring holds it (the newest
    /// one, as the daemon pins).
    pub fn generation_of(&self, digest: &str) -> Option<u64> {
        let g = self.status.as_ref().ok()?;
        g.generations.iter().filter(|e| e.digest == digest).map(|e| e.generation).max()
    }
}

/// One compiled table somewhere in the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetTable {
    pub digest: String,
    /// The latest time a replica compiled it (RFC 3339).
    pub compiled_at: String,
    /// Its change sentence, from the replica that compiled it last.
    pub summary: String,
    /// Per replica, in the order of the rows: its generation number for this table, if it holds it.
    pub generations: Vec<Option<u64>>,
    /// How many replicas serve it.
    pub serving: usize,
}

/// What a command would do, counted from the last poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan {
    /// Every replica the command goes to.
    pub replicas: usize,
    /// Replicas whose traffic moves to another table.
    pub change: usize,
    /// Pin: replicas that already serve the table (they are pinned to it). Release: replicas that
    /// are pinned to their newest table (only the pin goes).
    pub already: usize,
    /// Pin: replicas whose ring lacks the table (they will refuse it). Release: replicas not
    /// pinned (nothing changes there).
    pub other: usize,
    /// Replicas that did not answer the last poll; they are asked all the same.
    pub silent: usize,
}

/// Everything the fleet screen shows.
#[derive(Debug, Clone)]
pub struct FleetApp {
    /// The name, as given to `--fleet`.
    pub name: String,
    pub interval: Duration,
    /// The last poll, in address order.
    pub replicas: Vec<Replica>,
    pub polled: Option<Instant>,
    /// Why the name did not resolve at the last poll.
    pub lookup_error: Option<String>,
    /// The selected table, by digest.
    pub selected: Option<String>,
    pub controls: Controls<FleetCommand>,
    /// The last command and every replica's answer to it.
    pub results: Option<(FleetCommand, Answers<PinAnswer>)>,
}

impl FleetApp {
    pub fn new(name: impl Into<String>, interval: Duration, read_only: bool, has_token: bool) -> FleetApp {
        FleetApp {
            name: name.into(),
            interval,
            replicas: Vec::new(),
            polled: None,
            lookup_error: None,
            selected: None,
            controls: Controls::new(read_only, has_token),
            results: None,
        }
    }

    /// The digest most replicas serve.
    pub fn majority(&self) -> Option<&str> {
        majority(&self.replicas.iter().map(Replica::serving_digest).collect::<Vec<_>>())
    }

    /// Whether this replica serves another table than most do.
    pub fn differs(&self, replica: &Replica) -> bool {
        replica.serving_digest().is_some_and(|d| Some(d) != self.majority())
    }

    /// Every table some replica holds, newest first.
    pub fn tables(&self) -> Vec<FleetTable> {
        let mut tables: Vec<FleetTable> = Vec::new();
        for g in self.replicas.iter().filter_map(|r| r.status.as_ref().ok()) {
            for e in &g.generations {
                match tables.iter_mut().find(|t| t.digest == e.digest) {
                    Some(t) if t.compiled_at >= e.compiled_at => {}
                    Some(t) => {
                        t.compiled_at = e.compiled_at.clone();
                        t.summary = e.summary.clone();
                    }
                    None => tables.push(FleetTable {
                        digest: e.digest.clone(),
                        compiled_at: e.compiled_at.clone(),
                        summary: e.summary.clone(),
                        generations: Vec::new(),
                        serving: 0,
                    }),
                }
            }
        }
        for t in &mut tables {
            t.generations = self.replicas.iter().map(|r| r.generation_of(&t.digest)).collect();
            t.serving = self.replicas.iter().filter(|r| r.serving_digest() == Some(t.digest.as_str())).count();
        }
        tables.sort_by(|a, b| b.compiled_at.cmp(&a.compiled_at).then_with(|| a.digest.cmp(&b.digest)));
        tables
    }

    /// The index of the selected table in [`FleetApp::tables`].
    pub fn selected_index(&self, tables: &[FleetTable]) -> Option<usize> {
        let selected = self.selected.as_deref()?;
        tables.iter().position(|t| t.digest == selected)
    }

    /// What `command` would do, by the last poll.
    pub fn plan(&self, command: &FleetCommand) -> Plan {
        let mut plan = Plan { replicas: self.replicas.len(), ..Plan::default() };
        for r in &self.replicas {
            let Ok(g) = &r.status else {
                plan.silent += 1;
                continue;
            };
            let serving = r.serving_digest();
            let counter = match command {
                FleetCommand::Pin(digest) if serving == Some(digest.as_str()) => &mut plan.already,
                FleetCommand::Pin(digest) if r.generation_of(digest).is_some() => &mut plan.change,
                FleetCommand::Pin(_) => &mut plan.other,
                FleetCommand::Release if g.pinned.is_none() => &mut plan.other,
                FleetCommand::Release if r.newest_digest() == serving => &mut plan.already,
                FleetCommand::Release => &mut plan.change,
            };
            *counter += 1;
        }
        plan
    }
}

impl View for FleetApp {
    type Command = FleetCommand;
    type Update = FleetUpdate;

    fn on_key(&mut self, key: KeyEvent) -> Option<FleetCommand> {
        let rows: Vec<String> = self.tables().into_iter().map(|t| t.digest).collect();
        let nothing = "nothing to pin: no replica has listed a generation yet";
        let pin = |digest: &String| FleetCommand::Pin(digest.clone());
        self.controls.on_key(key, &rows, &mut self.selected, pin, FleetCommand::Release, nothing)
    }

    fn on_update(&mut self, update: FleetUpdate) {
        match update {
            FleetUpdate::Poll { at, replicas, lookup_error } => {
                self.replicas = replicas.into_iter().map(|(addr, status)| Replica { addr, status }).collect();
                self.polled = Some(at);
                self.lookup_error = lookup_error;
                let tables = self.tables();
                if self.selected_index(&tables).is_none() {
                    self.selected =
                        self.majority().map(str::to_string).or_else(|| tables.first().map(|t| t.digest.clone()));
                }
            }
            FleetUpdate::Answer { command, results } => {
                for (addr, result) in &results {
                    let replica = self.replicas.iter_mut().find(|r| r.addr == *addr);
                    if let (Some(Replica { status: Ok(g), .. }), Ok(answer)) = (replica, result) {
                        take_answer(g, &answer.state);
                    }
                }
                let message = self.summary(&command, &results);
                self.controls.answered(message);
                self.results = Some((command, results));
            }
        }
    }

    fn quit(&self) -> bool {
        self.controls.quit
    }
}

impl FleetApp {
    /// The message line after a command: how many replicas did it; the rows say which failed.
    fn summary(&self, command: &FleetCommand, results: &Answers<PinAnswer>) -> Message {
        let failed: Vec<&ClientError> = results.iter().filter_map(|(_, r)| r.as_ref().err()).collect();
        let what = command.describe();
        let total = results.len();
        if failed.is_empty() {
            return Message::info(format!("{what}: done on all {total} replicas"));
        }
        let hint = failed.iter().map(|e| self.controls.token_hint(e)).find(|h| !h.is_empty()).unwrap_or_default();
        let done = total - failed.len();
        Message::error(format!("{what}: {done} of {total} replicas did it, {} failed (see below){hint}", failed.len()))
    }
}
